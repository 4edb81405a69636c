"""The memory port (:class:`MemoryStore`) and where an open store's comes from
(:func:`memory_store`): :class:`SqliteMemory` runs the statements of
:mod:`core.store.memory_tables` on :class:`core.store.sqlite.SqliteStore`,
:class:`core.store.pg_memory.PgMemory` on :class:`core.store.postgres.PgStore` — the same
statements but the search. No backend imports this module: it stands above them
(tests/gateway/test_import_cycles.py).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from core.store.memory_tables import (
    ADD,
    COUNT,
    COUNTS,
    SET_OFF,
    SET_ON,
    SHARERS,
    Clock,
    MemoryEntry,
    MemoryScope,
    Setting,
    counts,
    digest,
    duplicate,
    entry,
    forget,
    forget_all,
    fts_query,
    normalised,
    recent,
    settings_of,
    sqlite_search,
    used,
    words,
)

if TYPE_CHECKING:
    from core.store.sqlite import SqliteStore

__all__ = [
    "Clock",
    "MemoryEntry",
    "MemoryScope",
    "MemoryStore",
    "Setting",
    "SqliteMemory",
    "memory_store",
    "normalised",
]


class MemoryStore(Protocol):
    """What the memory feature asks of the store. ``owners`` is always the complete list
    of owners the asker may see: the store never widens it."""

    async def add_memory(self, owner: str, text: str) -> MemoryEntry | None:
        """Store ``text`` for ``owner``; None when the same text is already there."""
        ...

    async def duplicate_of(self, owners: Sequence[str], text: str) -> MemoryEntry | None: ...

    async def count_memory(self, owner: str) -> int: ...

    async def memories_of(self, owners: Sequence[str], limit: int) -> list[MemoryEntry]:
        """Most recently saved or used first, then most used."""
        ...

    async def search_memory(
        self, owners: Sequence[str], query: str, limit: int
    ) -> list[MemoryEntry]:
        """Entries matching any word of ``query`` (full-text), best first; each found is
        counted as used."""
        ...

    async def forget_memory(self, owners: Sequence[str], entry_id: int) -> bool: ...

    async def forget_all_memory(self, owners: Sequence[str]) -> int: ...

    async def memory_counts(self) -> dict[str, int]:
        """How many entries per scope (``person``, ``chat``, ``profile``): no contents."""
        ...

    async def memory_settings(self, identities: Sequence[str]) -> list[tuple[str, str, str]]:
        """``(identity, setting, chat)`` rows of ``identities``."""
        ...

    async def set_memory_setting(
        self, identity: str, setting: Setting, chat: str, on: bool
    ) -> None: ...

    async def sharers_in(self, chat: str) -> list[str]:
        """The identities that shared their memory in ``chat``."""
        ...


class SqliteMemory:
    """:class:`MemoryStore` on the SQLite store's connection and write lock."""

    def __init__(self, store: SqliteStore, clock: Clock = time.time) -> None:
        self._store = store
        self._clock = clock

    async def add_memory(self, owner: str, text: str) -> MemoryEntry | None:
        now = self._clock()
        params = (owner, text, digest(text), now, now)
        rows = await self._store._take(ADD, params, f"remember for {owner}")
        return entry(rows[0]) if rows else None

    async def duplicate_of(self, owners: Sequence[str], text: str) -> MemoryEntry | None:
        rows = await self._store._read(duplicate(owners), (*owners, digest(text)))
        return entry(rows[0]) if rows else None

    async def count_memory(self, owner: str) -> int:
        rows = await self._store._read(COUNT, (owner,))
        return int(rows[0]["n"])

    async def memories_of(self, owners: Sequence[str], limit: int) -> list[MemoryEntry]:
        if not owners:
            return []
        rows = await self._store._read(recent(owners), (*owners, limit))
        return [entry(row) for row in rows]

    async def search_memory(
        self, owners: Sequence[str], query: str, limit: int
    ) -> list[MemoryEntry]:
        terms = words(query)
        if not owners or not terms:
            return []
        params = (fts_query(terms), *owners, limit)
        found = [entry(row) for row in await self._store._read(sqlite_search(owners), params)]
        if found:
            ids = [e.id for e in found]
            await self._store._write(used(ids), (self._clock(), *ids), "count memory use")
        return found

    async def forget_memory(self, owners: Sequence[str], entry_id: int) -> bool:
        if not owners:
            return False
        written = await self._store._write(forget(owners), (entry_id, *owners), "forget memory")
        return written.rowcount == 1

    async def forget_all_memory(self, owners: Sequence[str]) -> int:
        if not owners:
            return 0
        return (await self._store._write(forget_all(owners), tuple(owners), "forget")).rowcount

    async def memory_counts(self) -> dict[str, int]:
        return counts(await self._store._read(COUNTS, ()))

    async def memory_settings(self, identities: Sequence[str]) -> list[tuple[str, str, str]]:
        if not identities:
            return []
        rows = await self._store._read(settings_of(identities), tuple(identities))
        return [(row["identity"], row["setting"], row["chat"]) for row in rows]

    async def set_memory_setting(
        self, identity: str, setting: Setting, chat: str, on: bool
    ) -> None:
        sql = SET_ON if on else SET_OFF
        await self._store._write(sql, (identity, setting, chat), f"memory setting of {identity}")

    async def sharers_in(self, chat: str) -> list[str]:
        return [row["identity"] for row in await self._store._read(SHARERS, (chat,))]


def memory_store(store: object, clock: Clock = time.time) -> MemoryStore:
    """The memory port of an open store (SQLite or PostgreSQL)."""
    from core.store.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        return SqliteMemory(store, clock)
    from core.store.postgres import PgStore

    if isinstance(store, PgStore):
        from core.store.pg_memory import PgMemory

        return PgMemory(store, clock)
    raise TypeError(f"no memory tables in {type(store).__name__}")
