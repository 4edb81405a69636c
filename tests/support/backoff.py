"""Injected time for backoff: a sleep that records each wait and never waits on the clock,
and a jitter source that always draws the ceiling (so a backoff's waits are exact)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
WAIT = 10.0


class Ceiling(random.Random):
    """``uniform(a, b)`` is ``b``: full jitter then waits its whole ceiling."""

    def uniform(self, a: float, b: float) -> float:
        return b


class TestSleep:
    """Records each requested wait; returns at once while open, else holds every caller
    until :meth:`release`. :meth:`wait_for` waits on a condition over the waits asked."""

    __test__ = False  # not a test class

    def __init__(self, *, held: bool = False) -> None:
        self.waits: list[float] = []
        self._open = asyncio.Event()
        if not held:
            self._open.set()
        self._changed = asyncio.Condition()

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        async with self._changed:
            self._changed.notify_all()
        await self._open.wait()
        await asyncio.sleep(0)

    def release(self) -> None:
        """Let every held and later wait pass at once."""
        self._open.set()

    async def wait_for(self, predicate: Callable[[list[float]], T], timeout: float = WAIT) -> T:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: predicate(self.waits))
        return predicate(self.waits)
