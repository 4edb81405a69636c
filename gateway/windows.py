"""A sliding window of outbound calls: how the scheduler keeps to a platform's declared
limit (:class:`adapters.base.RateLimit`; docs/architecture.md, "The outbound scheduler").
A call occupies its window from the moment it starts until ``seconds`` after it ended."""

from __future__ import annotations

import math
from collections import deque

from adapters.base import RateLimit


class SlidingWindow:
    """A sliding window of calls: in flight, plus the end times of the recent ones."""

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self.in_flight = 0
        self._ended: deque[float] = deque()

    def ready_at(self, now: float) -> float:
        ended, limit = self._ended, self.limit
        while ended and ended[0] <= now - limit.seconds:
            ended.popleft()
        if self.in_flight + len(ended) < limit.count:
            return now
        return ended[0] + limit.seconds if ended else math.inf

    def quiet(self, now: float) -> bool:
        self.ready_at(now)
        return self.in_flight == 0 and not self._ended

    def take(self) -> None:
        self.in_flight += 1

    def release(self, now: float | None) -> None:
        """The call ended at ``now``; ``None``: refused (a 429), so it takes no slot."""
        self.in_flight -= 1
        if now is not None:
            self._ended.append(now)
