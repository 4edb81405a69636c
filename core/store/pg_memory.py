"""The memory tables on PostgreSQL (migration 5): :class:`PgMemory` runs
:mod:`core.store.memory_tables`' statements on :class:`core.store.postgres.PgStore`; the search
is PostgreSQL full-text search (a ``tsvector`` column generated with the ``simple``
configuration — no stemming, like SQLite FTS5's ``unicode61`` — under a GIN index)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from core.store import memory_tables as m
from core.store.statements import Statement

if TYPE_CHECKING:
    from core.store.postgres import PgStore


def pg_search(owners: Sequence[str]) -> str:
    return (
        "SELECT id, owner, text, created_at, used_at, uses FROM memory_entries"
        f" WHERE owner IN ({m.in_list(len(owners))}) AND tsv @@ to_tsquery('simple', ?)"
        " ORDER BY ts_rank(tsv, to_tsquery('simple', ?)) DESC, id DESC LIMIT ?"
    )


def tsquery(terms: Sequence[str]) -> str:
    return " | ".join(f"'{term}'" for term in terms)


class PgMemory:
    """:class:`core.store.memory.MemoryStore` on PostgreSQL (made by
    :func:`core.store.memory.memory_store`)."""

    def __init__(self, store: PgStore, clock: m.Clock = time.time) -> None:
        self._store = store
        self._clock = clock

    async def add_memory(self, owner: str, text: str) -> m.MemoryEntry | None:
        now = self._clock()
        params = (owner, text, m.digest(text), now, now)
        rows = await self._store._returning(Statement(m.ADD, params, f"remember for {owner}"))
        return m.entry(rows[0]) if rows else None

    async def duplicate_of(self, owners: Sequence[str], text: str) -> m.MemoryEntry | None:
        rows = await self._store._read(_columns(m.duplicate(owners)), (*owners, m.digest(text)))
        return m.entry(rows[0]) if rows else None

    async def count_memory(self, owner: str) -> int:
        rows = await self._store._read(m.COUNT, (owner,))
        return int(rows[0]["n"])

    async def memories_of(self, owners: Sequence[str], limit: int) -> list[m.MemoryEntry]:
        if not owners:
            return []
        rows = await self._store._read(_columns(m.recent(owners)), (*owners, limit))
        return [m.entry(row) for row in rows]

    async def search_memory(
        self, owners: Sequence[str], query: str, limit: int
    ) -> list[m.MemoryEntry]:
        terms = m.words(query)
        if not owners or not terms:
            return []
        params = (*owners, tsquery(terms), tsquery(terms), limit)
        found = [m.entry(row) for row in await self._store._read(pg_search(owners), params)]
        if found:
            ids = [e.id for e in found]
            await self._store._write(Statement(m.used(ids), (self._clock(), *ids), "use"))
        return found

    async def forget_memory(self, owners: Sequence[str], entry_id: int) -> bool:
        if not owners:
            return False
        statement = Statement(m.forget(owners), (entry_id, *owners), "forget memory")
        return await self._store._write(statement) == 1

    async def forget_all_memory(self, owners: Sequence[str]) -> int:
        if not owners:
            return 0
        return await self._store._write(Statement(m.forget_all(owners), tuple(owners), "forget"))

    async def memory_counts(self) -> dict[str, int]:
        return m.counts(await self._store._read(m.COUNTS, ()))

    async def memory_settings(self, identities: Sequence[str]) -> list[tuple[str, str, str]]:
        if not identities:
            return []
        rows = await self._store._read(m.settings_of(identities), tuple(identities))
        return [(row["identity"], row["setting"], row["chat"]) for row in rows]

    async def set_memory_setting(
        self, identity: str, setting: m.Setting, chat: str, on: bool
    ) -> None:
        sql = m.SET_ON if on else m.SET_OFF
        await self._store._write(Statement(sql, (identity, setting, chat), "memory setting"))

    async def sharers_in(self, chat: str) -> list[str]:
        return [row["identity"] for row in await self._store._read(m.SHARERS, (chat,))]


def _columns(sql: str) -> str:
    """``SELECT *`` without the generated ``tsv`` column."""
    return sql.replace("SELECT *", "SELECT id, owner, text, created_at, used_at, uses", 1)
