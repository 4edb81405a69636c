"""The arithmetic of a job's schedule: when its occurrences fall (docs/architecture.md,
"Scheduled turns"). No date math by hand: cron expressions through ``croniter``, wall
clock to instants through ``zoneinfo``.

A cron expression is read in the job's *wall clock*: ``croniter`` steps naive local times,
and each is made an instant in the job's zone. So a daily ``30 2 * * *`` in Europe/Berlin
runs once on both DST days: in the spring gap 02:30 does not exist and the instant taken is
that of 02:30 before the change (03:30 CEST); in the autumn repeat 02:30 happens twice and
the first one is taken (``fold=0``) — an occurrence is always later than the one before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

Kind = Literal["at", "every", "cron"]

_EVERY = re.compile(r"(\d+)\s*([smhdw])", re.IGNORECASE)
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class ScheduleError(ValueError):
    """A schedule that cannot be used; the message says why, for the person."""


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` (``ScheduleError`` when unknown)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError(f"unknown time zone {name!r} (try e.g. Europe/Berlin)") from exc


def parse_interval(text: str) -> int:
    """``1h``, ``90m``, ``1h30m``, ``2d`` → seconds (``ScheduleError`` otherwise)."""
    compact = text.replace(" ", "")
    parts = _EVERY.findall(compact)
    if not parts or "".join(n + u for n, u in parts).lower() != compact.lower():
        raise ScheduleError(f"{text!r} is not an interval (e.g. 30m, 1h, 1h30m, 2d)")
    return sum(int(n) * _UNIT[u.lower()] for n, u in parts)


def parse_at(text: str, tz: str, now: float) -> float:
    """``2027-01-15 09:00`` or ``09:00`` (the next one) in ``tz`` → a UNIX time after ``now``."""
    where = zone(tz)
    text = text.strip()
    try:
        if len(text) <= 5:
            clock = datetime.strptime(text, "%H:%M").time()
            today = datetime.fromtimestamp(now, where).date()
            local = datetime.combine(today, clock)
            at = _instant(local, where)
            if at <= now:
                at = _instant(local + timedelta(days=1), where)
            return at
        at = _instant(datetime.strptime(text, "%Y-%m-%d %H:%M"), where)
    except ValueError as exc:
        raise ScheduleError(f"{text!r} is not a time (YYYY-MM-DD HH:MM or HH:MM)") from exc
    if at <= now:
        raise ScheduleError(f"{text} ({tz}) has already passed")
    return at


def check_cron(expression: str) -> str:
    """The five-field expression, checked (``ScheduleError`` otherwise)."""
    expression = " ".join(expression.split())
    if len(expression.split(" ")) != 5 or not croniter.is_valid(expression):
        raise ScheduleError(f"{expression!r} is not a five-field cron expression")
    return expression


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a job's occurrences fall: ``kind`` with its ``spec`` (``at``: the UNIX time;
    ``every``: seconds; ``cron``: the expression) in the zone ``tz``."""

    kind: Kind
    spec: str
    tz: str

    def first(self, now: float) -> float:
        """The first occurrence of a job made at ``now``."""
        if self.kind == "at":
            return float(self.spec)
        if self.kind == "every":
            return now + float(self.spec)
        return self.after(now)

    def after(self, at: float) -> float:
        """The first occurrence strictly later than ``at`` (``inf`` for a one-shot)."""
        if self.kind == "at":
            return float("inf")
        if self.kind == "every":
            return at + float(self.spec)
        where = zone(self.tz)
        wall = datetime.fromtimestamp(at, where).replace(tzinfo=None)
        steps = croniter(self.spec, wall)
        while True:
            candidate = _instant(steps.get_next(datetime), where)
            if candidate > at:
                return candidate

    def latest_until(self, start: float, now: float, cap: int = 10_000) -> tuple[float, int]:
        """The last occurrence at or before ``now`` counting from ``start`` (itself one),
        and how many fell in between (at most ``cap`` counted)."""
        if self.kind == "every":
            step = float(self.spec)
            count = int((now - start) // step) + 1
            return start + (count - 1) * step, count
        latest, count = start, 1
        while count < cap:
            following = self.after(latest)
            if following > now:
                break
            latest, count = following, count + 1
        return latest, count


def _instant(wall: datetime, where: ZoneInfo) -> float:
    """A naive wall-clock time in ``where`` as a UNIX time (the first of a repeated one;
    one in a DST gap as read with the offset before the change)."""
    return wall.replace(tzinfo=where, fold=0).timestamp()


def wall_clock(at: float, tz: str, with_date: bool = False) -> str:
    """``09:00`` (or ``2027-01-15 09:00``) of ``at`` in ``tz``, for messages."""
    local = datetime.fromtimestamp(at, zone(tz))
    return local.strftime("%Y-%m-%d %H:%M" if with_date else "%H:%M")
