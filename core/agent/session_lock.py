"""One turn per session key at a time (``docs/turn-loop.md`` §2, step 1), with eviction.

Each key gets an ``asyncio.Lock`` while anyone holds or waits for it; the entry is removed
when the last holder leaves, so the map only ever contains keys with a turn running or
waiting (no unbounded growth — the "unused locks cleaner" aiogram left as a TODO).

The wait honours the turn's token (:meth:`SessionLocks.hold` with ``token``): a turn that
waits behind another turn or a ``/compact`` of its session and is stopped meanwhile gives
up the wait at once (``hold`` yields False: nothing was held, the turn never began). A free
lock is taken whatever the token says, so a turn stopped before it started still opens and
ends ``interrupted`` with its hooks (``docs/turn-loop.md`` §2 step 1).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal

from core.cancellation import CancellationToken


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
    async def hold(self, key: str, token: CancellationToken | None = None) -> AsyncIterator[bool]:
        """Hold ``key``'s lock for the block (True); False when ``token`` was cancelled
        while the lock was busy (nothing held: the block must not touch the session)."""
        slot = self._slots.setdefault(key, _Slot())
        slot.users += 1
        try:
            if not await _acquire(slot.lock, token):
                yield False
                return
            try:
                yield True
            finally:
                slot.lock.release()
        finally:
            slot.users -= 1
            if slot.users == 0:
                del self._slots[key]


async def _acquire(lock: asyncio.Lock, token: CancellationToken | None) -> bool:
    """Take ``lock`` (True), or give up the wait when ``token`` is cancelled (False)."""
    if token is None or not lock.locked():
        await lock.acquire()
        return True
    if token.cancelled:
        return False
    waiter = asyncio.ensure_future(lock.acquire())
    stop = asyncio.ensure_future(token.wait())
    try:
        await asyncio.wait({waiter, stop}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        await _give_up(lock, waiter)
        raise
    finally:
        stop.cancel()
        await asyncio.wait({stop})
    if waiter.done() and not token.cancelled:
        return True
    await _give_up(lock, waiter)
    return False


async def _give_up(lock: asyncio.Lock, waiter: asyncio.Task[Literal[True]]) -> None:
    """Withdraw a pending ``acquire``; one that got the lock meanwhile releases it."""
    waiter.cancel()
    await asyncio.wait({waiter})
    if not waiter.cancelled():
        lock.release()
