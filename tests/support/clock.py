"""A pacing clock for tests: the real time plus every wait it was asked for, skipped.

``TestClock.sleep(s)`` returns at once and moves the clock ``s`` ahead, so the outbound
scheduler (which waits on its platform's ``Capabilities.pace_clock``) waits out a flood
window without the test waiting for it, and a simulator reading the same clock
(``sim.clock = clock.now``) sees the calls spread exactly as the scheduler paced them.
Time never goes back and still passes in real time, so anything else measured on it keeps
its order (docs/architecture.md, "The outbound scheduler").
"""

from __future__ import annotations

import asyncio
import time


class TestClock:
    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self.skipped = 0.0
        """Seconds of waiting skipped so far."""

    def now(self) -> float:
        return time.monotonic() + self.skipped

    async def sleep(self, seconds: float) -> None:
        self.skipped += max(seconds, 0.0)
        await asyncio.sleep(0)
