"""A clock that only the test moves: ``sleep(s)`` returns once :meth:`ManualClock.advance`
has moved it ``s`` ahead, so a window of 500 ms and messages 100 ms apart cost no real
time and happen in exactly that order (the debounce tests, ``core.debounce.Pace``)."""

from __future__ import annotations

import asyncio


class ManualClock:
    def __init__(self) -> None:
        self.now_s = 1000.0
        self._moved = asyncio.Condition()

    def now(self) -> float:
        return self.now_s

    async def sleep(self, seconds: float) -> None:
        end = self.now_s + seconds
        async with self._moved:
            await self._moved.wait_for(lambda: self.now_s >= end)

    async def advance(self, seconds: float) -> None:
        """Move the clock and let the sleepers it woke (and what they start) run."""
        self.now_s += seconds
        async with self._moved:
            self._moved.notify_all()
        for _ in range(5):
            await asyncio.sleep(0)
