"""Quotas (``[quotas]``): the day and month a call falls in, and whether it may start.

:class:`QuotaRule` decides from one :meth:`core.store.usage.UsageBook.spent` read (the
person's and the chat's day and month in one statement) whether a model call may start;
when it may not, :class:`core.agent.usage.QuotaReached` carries the reply: which quota,
what was spent, and when it resets (midnight, or the first of the next month, in
``[quotas] timezone``; on the injected clock).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from core.agent.scope import TurnScope
from core.agent.usage import QuotaReached
from core.store.usage import Spent, UsageBook
from gateway.config.quotas import QuotaLimits, QuotasSection


@dataclass(frozen=True, slots=True)
class Window:
    """The day and the month ``now`` falls in (UNIX seconds of their starts and ends)."""

    day_start: float
    day_end: float
    month_start: float
    month_end: float

    @classmethod
    def at(cls, now: float, zone: ZoneInfo) -> Window:
        today = datetime.fromtimestamp(now, zone).date()
        first = today.replace(day=1)
        next_month = (first + timedelta(days=32)).replace(day=1)
        return cls(
            _midnight(today, zone), _midnight(today + timedelta(days=1), zone),
            _midnight(first, zone), _midnight(next_month, zone),
        )  # fmt: skip


def _midnight(day: date, zone: ZoneInfo) -> float:
    return datetime.combine(day, time(), tzinfo=zone).timestamp()


@dataclass(frozen=True, slots=True)
class Over:
    """A quota that is reached: whose, which, how much of it, and when it resets."""

    whose: str  # "your" | "this chat's"
    period: str  # "daily" | "monthly"
    unit: str  # "tokens" | "cost"
    used: float
    limit: float
    resets: float

    def text(self, zone: ZoneInfo) -> str:
        reset = datetime.fromtimestamp(self.resets, zone)
        amount = _amount(self.unit, self.limit)
        used = _amount(self.unit, self.used)
        who = "You have" if self.whose == "your" else "This chat has"
        return (
            f"⛔ {who} reached {self.whose} {self.period} quota of {amount} ({used} used). "
            f"It resets at {reset:%Y-%m-%d %H:%M} {reset.tzname()}."
        )


def _amount(unit: str, value: float) -> str:
    return f"{int(value):,} tokens" if unit == "tokens" else f"{value:,.2f} in model cost"


def over(whose: str, limits: QuotaLimits, spent: Spent, window: Window) -> Over | None:
    """The first of ``limits`` that ``spent`` has reached, daily before monthly."""
    checks = (
        ("daily", "tokens", spent.day_tokens, limits.daily_tokens, window.day_end),
        ("daily", "cost", spent.day_cost, limits.daily_cost, window.day_end),
        ("monthly", "tokens", spent.month_tokens, limits.monthly_tokens, window.month_end),
        ("monthly", "cost", spent.month_cost, limits.monthly_cost, window.month_end),
    )
    for period, unit, used, limit, resets in checks:
        if limit is not None and used >= limit:
            return Over(whose, period, unit, used, limit, resets)
    return None


class QuotaRule:
    """``[quotas]`` applied to a call of a session: approvers (``approvers(session_key)``,
    platform-qualified) exempt unless ``[quotas.approvers]`` gives their own person caps."""

    def __init__(
        self,
        section: QuotasSection,
        book: UsageBook,
        approvers: Callable[[str], Collection[str]],
        clock: Callable[[], float],
    ) -> None:
        self._section = section
        self._zone = section.zone()
        self._book = book
        self._approvers = approvers
        self._clock = clock

    def limits_of(self, scope: TurnScope) -> tuple[QuotaLimits, QuotaLimits] | None:
        """The person's and the chat's caps for ``scope``; None: nothing to check."""
        person = scope.requested_by
        section = self._section
        if person is not None and person in self._approvers(scope.session_key):
            own = section.approvers
            return (own, QuotaLimits()) if own is not None and own.any else None
        if section.person.any or section.chat.any:
            return section.person, section.chat
        return None

    async def admit(self, scope: TurnScope, chat: str) -> None:
        limits = self.limits_of(scope)
        if limits is None:
            return
        window = Window.at(self._clock(), self._zone)
        mine, chats = await self._book.spent(
            scope.requested_by, chat, window.day_start, window.month_start
        )
        found = over("your", limits[0], mine, window) or over(
            "this chat's", limits[1], chats, window
        )
        if found is not None:
            raise QuotaReached(found.text(self._zone))
