"""The dashboard's memory line (README "Memory"): how many entries each scope holds —
people, chats, profiles — and never what they say.

Read from the store at most every :data:`REFRESH` seconds (the dashboard's state is
built four times a second; a failed read keeps the last counts), only when ``[memory]``
is on: off, the dashboard has no memory line and asks the store nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

logger = logging.getLogger(__name__)

REFRESH = 10.0
SCOPES = ("person", "chat", "profile")

Counter = Callable[[], Awaitable[dict[str, int]]]


class MemoryCounts:
    """The latest counts, re-read when older than :data:`REFRESH` on ``clock``."""

    def __init__(self, count: Counter, clock: Callable[[], float] = time.monotonic) -> None:
        self._count, self._clock = count, clock
        self._counts: dict[str, int] | None = None
        self._read_at = 0.0

    async def current(self) -> dict[str, int]:
        now = self._clock()
        if self._counts is None or now - self._read_at >= REFRESH:
            self._read_at = now
            try:
                found = await self._count()
            except Exception as exc:  # the store out of reach: the last counts stay
                logger.warning("dashboard: memory counts not read (%s)", type(exc).__name__)
                found = self._counts or {}
            self._counts = {scope: int(found.get(scope, 0)) for scope in SCOPES}
        return dict(self._counts)
