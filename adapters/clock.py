"""The clock an adapter's rate windows are measured on (``Capabilities.pace_clock``), and
the real one.

The gateway's outbound scheduler reads ``now()`` for every call it paces and ``sleep()``
to wait a window out (docs/architecture.md, "The outbound scheduler", **Clock**); a test
passes a clock that skips the wait (``tests/support/clock.py``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class PaceClock(Protocol):
    """The clock rate windows are measured on, and how the scheduler waits on it."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    """The real clock: ``time.monotonic`` and ``asyncio.sleep`` themselves (no wrapper
    function of ours between the scheduler and them)."""

    now = staticmethod(time.monotonic)
    sleep = staticmethod(asyncio.sleep)


MONOTONIC: PaceClock = MonotonicClock()
