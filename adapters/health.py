"""A platform connection's health as data, and the loop that keeps the connection alive.

Every adapter's long-lived connection (Discord gateway, Slack socket, Telegram polling, the
web listener) states its health as a :class:`Health` value, read by ``/healthz``,
``/metrics`` and the dashboard (docs/architecture.md, "Connections and health")::

    starting ──► up ──► retrying(since, reason) ──► up
                  │            │
                  └────────────┴──► down(reason)      fatal: bad token, disallowed intents
    (any) ──► stopped                                 the gateway stopped the adapter

:class:`Supervisor` runs one connection: it awaits ``connect()`` (a coroutine that returns
or raises when the connection ends); a transient end is retried with exponential backoff
and full jitter (``base`` doubling to ``cap`` seconds; reset after a connection that stayed
up ``stable`` seconds); an error that ``fatal`` names is reported once, with its cause and
fix, and the connection is left down. ``connect()`` itself calls ``cell.up()`` once the
connection is receiving. The clock and the sleep are injected, so tests run the backoff on
a test clock.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

HealthState = Literal["starting", "up", "retrying", "down", "stopped"]

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]

BACKOFF_BASE = 1.0
BACKOFF_CAP = 60.0
STABLE_SECONDS = 30.0
RECENT_STATES = 16


@dataclass(frozen=True, slots=True)
class Health:
    """Where a connection stands: ``since`` is the wall-clock time it entered ``state``;
    ``reason`` says why it is retrying or down (empty when up)."""

    state: HealthState
    since: float
    reason: str = ""

    @property
    def ok(self) -> bool:
        """Whether the platform can reach the agent now (a stopped adapter is not down)."""
        return self.state in ("up", "stopped")


class Fatal(Exception):
    """A connection error that retrying cannot fix; the message says the cause and the fix."""


class HealthCell:
    """The one :class:`Health` an adapter exposes as ``adapter.health``, changed by its
    connection code through the methods below (each logs a change once). ``recent`` keeps
    the last states entered; :meth:`wait_for` wakes on each change."""

    def __init__(self, platform: str, clock: Clock = time.time) -> None:
        self.platform = platform
        self._clock = clock
        self.value = Health("starting", clock())
        self.recent: deque[HealthState] = deque(["starting"], maxlen=RECENT_STATES)
        self._changed = asyncio.Event()
        self._log = logging.getLogger(f"adapters.{platform}")

    async def wait_for(self, condition: Callable[[HealthCell], bool]) -> Health:
        """Until ``condition(self)`` holds, checked at each change (never polled)."""
        while not condition(self):
            await self._changed.wait()
        return self.value

    def up(self) -> None:
        if self.value.state == "up":
            return  # keep `since`: a RESUME after a resumable close is not a new "up"
        if self.value.state == "retrying":
            self._log.warning("%s: connected again", self.platform)
        self._set("up")

    def retrying(self, reason: str) -> None:
        if self.value.state != "retrying":
            self._set("retrying", reason)
        else:  # keep `since`: retrying since the first failure
            self.value = Health("retrying", self.value.since, reason)
            self._notify()

    def down(self, reason: str) -> None:
        if self.value.state != "down":
            self._log.error("%s: down: %s", self.platform, reason)
        self._set("down", reason)

    def stopped(self) -> None:
        self._set("stopped")

    def _set(self, state: HealthState, reason: str = "") -> None:
        self.value = Health(state, self._clock(), reason)
        self.recent.append(state)
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()


@dataclass(slots=True)
class Backoff:
    """Exponential backoff with full jitter: attempt ``n`` waits ``uniform(0, min(cap,
    base * 2**n))`` seconds, at least ``base / 10``."""

    base: float = BACKOFF_BASE
    cap: float = BACKOFF_CAP
    attempt: int = 0
    rng: random.Random | None = None

    def next(self) -> float:
        ceiling = min(self.cap, self.base * (2**self.attempt))
        self.attempt += 1
        draw = (self.rng or random).uniform(0, ceiling)
        return max(draw, self.base / 10)

    def reset(self) -> None:
        self.attempt = 0


class Supervisor:
    """Keep one connection alive (see the module docstring)."""

    def __init__(
        self,
        cell: HealthCell,
        connect: Callable[[], Awaitable[None]],
        *,
        fatal: Callable[[BaseException], str | None] = lambda exc: None,
        backoff: Backoff | None = None,
        stable: float = STABLE_SECONDS,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.cell = cell
        self._connect = connect
        self._fatal = fatal
        self._backoff = backoff or Backoff()
        self._stable = stable
        self._clock = clock
        self._sleep = sleep
        self.restarts = 0
        """Connections started again after a transient end, during this run."""

    async def run(self) -> None:
        """Connect, reconnect after each transient end, return once the connection is
        fatally down. Cancellation (the adapter stopping) ends it at once: it reaches the
        connection's task, awaited until it has ended.

        Each connection runs in a task of its own, so an event the connection receives
        resumes only the connection's frames, not this loop's as well."""
        while True:
            began = self._clock()
            try:
                await asyncio.ensure_future(self._connect())  # its own task (docstring)
                reason = "the connection ended"
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                fix = exc.args[0] if isinstance(exc, Fatal) and exc.args else self._fatal(exc)
                if fix is not None:
                    self.cell.down(str(fix))
                    return
                reason = _one_line(exc)
            if self._clock() - began >= self._stable:
                self._backoff.reset()
            self.cell.retrying(reason)
            wait = self._backoff.next()
            self.cell._log.warning(
                "%s: %s; reconnecting in %.1fs", self.cell.platform, reason, wait
            )
            await self._sleep(wait)
            self.restarts += 1


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
