"""One turn per session key at a time (``docs/turn-loop.md`` §2, step 1), with eviction.

Each key gets an ``asyncio.Lock`` while anyone holds or waits for it; the entry is removed
when the last holder leaves, so the map only ever contains keys with a turn running or
waiting (no unbounded growth — the "unused locks cleaner" aiogram left as a TODO).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


@dataclass(slots=True)
class _Slot:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class SessionLocks:
    def __init__(self) -> None:
        self._slots: dict[str, _Slot] = {}

    def __len__(self) -> int:
        """Keys with a turn running or waiting."""
        return len(self._slots)

    def waiting(self, key: str) -> int:
        """Turns of ``key`` holding or waiting for the lock (0 when none)."""
        slot = self._slots.get(key)
        return slot.users if slot is not None else 0

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        slot = self._slots.setdefault(key, _Slot())
        slot.users += 1
        try:
            async with slot.lock:
                yield
        finally:
            slot.users -= 1
            if slot.users == 0:
                del self._slots[key]
