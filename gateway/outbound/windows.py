"""The budgets the outbound scheduler keeps to a platform's declared limits
(:class:`adapters.base.RateLimit`; docs/architecture.md, "The outbound scheduler").

* :class:`SlidingWindow` — at most ``count`` calls in any ``seconds``: a call occupies its
  window from the moment it starts until ``seconds`` after it ended.
* :class:`TokenBucket` — a limit with a ``burst``: up to ``burst`` calls at once, refilled
  ``count`` per ``seconds`` (Telegram's "about one message a second in a chat, short bursts
  allowed"). A call takes its token when it starts; the refill the call's own flight would
  have earned is not credited — the bucket refills only while none of its calls is in flight
  (the platform counted a call somewhere between its start and its end, so measuring from
  the end keeps inside the platform's bucket however the network delays calls). A refused
  call (a 429) empties the bucket: the platform's is empty.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Protocol

from adapters.base import RateLimit

EPSILON = 1e-9
"""Refill short of a whole token by less than this counts as whole (float rounding)."""


class Budget(Protocol):
    """What the scheduler asks of a window or a bucket."""

    limit: RateLimit

    def ready_at(self, now: float, spare: int = 0) -> float:
        """When a call may start, leaving ``spare`` calls' room for others (bucket only)."""
        ...

    def quiet(self, now: float) -> bool:
        """Nothing in flight and the budget whole again: its state may be dropped."""
        ...

    def take(self, now: float) -> None: ...

    def release(self, now: float, *, refused: bool = False) -> None:
        """The call ended at ``now``; ``refused``: the platform refused it (a 429)."""
        ...


class SlidingWindow:
    """A sliding window of calls: in flight, plus the end times of the recent ones."""

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self.in_flight = 0
        self._ended: deque[float] = deque()

    def ready_at(self, now: float, spare: int = 0) -> float:
        ended, limit = self._ended, self.limit
        while ended and ended[0] <= now - limit.seconds:
            ended.popleft()
        if self.in_flight + len(ended) < limit.count:
            return now
        return ended[0] + limit.seconds if ended else math.inf

    def quiet(self, now: float) -> bool:
        self.ready_at(now)
        return self.in_flight == 0 and not self._ended

    def take(self, now: float) -> None:
        self.in_flight += 1

    def release(self, now: float, *, refused: bool = False) -> None:
        """A refused call (a 429) takes no slot."""
        self.in_flight -= 1
        if not refused:
            self._ended.append(now)


class TokenBucket:
    """Up to ``limit.burst`` calls at once, refilled ``limit.count`` per ``limit.seconds``."""

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self.capacity = float(limit.burst or limit.count)
        self.rate = limit.count / limit.seconds
        self.tokens = self.capacity
        self.in_flight = 0
        self._at: float | None = None

    def _refill(self, now: float) -> None:
        """Credit the time since the last call ended (none while one is in flight)."""
        if self.in_flight or (self._at is not None and now <= self._at):
            return
        if self._at is not None:
            self.tokens = min(self.capacity, self.tokens + (now - self._at) * self.rate)
        self._at = now

    def ready_at(self, now: float, spare: int = 0) -> float:
        needed = 1.0 + spare
        if needed > self.capacity:
            needed = 1.0  # a bucket too small to spare anything lends its last token
        if self.tokens + EPSILON >= needed:
            return now  # enough without the refill (credited by the next take all the same)
        self._refill(now)
        if self.tokens + EPSILON >= needed:
            return now
        return now + (needed - self.tokens) / self.rate

    def quiet(self, now: float) -> bool:
        self._refill(now)
        return self.in_flight == 0 and self.tokens + EPSILON >= self.capacity

    def take(self, now: float) -> None:
        self._refill(now)
        self.tokens -= 1.0
        self.in_flight += 1

    def release(self, now: float, *, refused: bool = False) -> None:
        """Refill restarts from ``now`` (the call's flight earns none); refused: empty."""
        self.in_flight -= 1
        if self._at is None or now > self._at:
            self._at = now
        if refused:
            self.tokens = min(self.tokens, 0.0)


def budget_maker(limit: RateLimit) -> Callable[[], Budget]:
    """How the budget ``limit`` declares is made — a token bucket when it has a ``burst`` —
    chosen once per scheduler, so a chat's budget is made by one constructor call."""
    kind: type[TokenBucket] | type[SlidingWindow]
    kind = TokenBucket if limit.burst is not None else SlidingWindow
    return partial(kind, limit)
