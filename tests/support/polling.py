"""Waiting on in-process state nothing signals (a scheduler's queue, a dispatcher's lanes):
a bounded poll of the condition, never a sleep standing in for it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

POLL_SECONDS = 0.01


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Return once ``condition()`` holds; TimeoutError when it has not within ``timeout``."""
    for _ in range(max(1, int(timeout / POLL_SECONDS))):
        if condition():
            return
        await asyncio.sleep(POLL_SECONDS)
    if not condition():
        raise TimeoutError(f"not true within {timeout}s: {condition}")
