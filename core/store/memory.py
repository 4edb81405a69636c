"""The store's memory tables (SQLite migration 12, PostgreSQL 5): what the agent remembers
(``memory_entries``, searched through SQLite FTS5 / PostgreSQL ``tsvector`` + GIN) and each
identity's memory settings (``memory_settings``: memory off, shared in a chat).

An entry belongs to one *owner*, a string that names its scope (:mod:`core.memory.scopes`):
``person:<platform>:<user>`` (an identity; a linked person's entries are those of all their
identities), ``chat:<chat>`` (a group, channel or thread), ``profile:<name>`` (written by an
operator). A duplicate (the same normalised text for the same owner, :func:`digest`) is not
stored twice.

:class:`MemoryStore` is the small port the memory feature needs; :class:`SqliteMemory` runs it
on :class:`core.store.sqlite.SqliteStore` and :class:`core.store.pg_memory.PgMemory` on
:class:`core.store.postgres.PgStore` — the same statements but the search.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from core.store.statements import Row

if TYPE_CHECKING:
    from core.store.sqlite import SqliteStore

Clock = Callable[[], float]
MemoryScope = Literal["person", "chat", "profile"]
Setting = Literal["off", "share"]
"""``off`` (chat ``""``): nothing is saved for the identity; ``share`` (a chat): the
identity's person entries may be seen in that chat."""

SQLITE_TABLES: tuple[str, ...] = (
    """CREATE TABLE memory_entries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        owner TEXT NOT NULL,
        text TEXT NOT NULL,
        digest TEXT NOT NULL,
        created_at REAL NOT NULL,
        used_at REAL NOT NULL,
        uses INTEGER NOT NULL DEFAULT 0,
        UNIQUE (owner, digest)
    )""",
    "CREATE INDEX memory_entries_recent ON memory_entries (owner, used_at)",
    """CREATE VIRTUAL TABLE memory_fts USING fts5(
        text, content='memory_entries', content_rowid='id'
    )""",
    """CREATE TRIGGER memory_fts_added AFTER INSERT ON memory_entries BEGIN
        INSERT INTO memory_fts (rowid, text) VALUES (new.id, new.text);
    END""",
    """CREATE TRIGGER memory_fts_removed AFTER DELETE ON memory_entries BEGIN
        INSERT INTO memory_fts (memory_fts, rowid, text) VALUES ('delete', old.id, old.text);
    END""",
    """CREATE TABLE memory_settings (
        identity TEXT NOT NULL,
        setting TEXT NOT NULL,
        chat TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (identity, setting, chat)
    )""",
    "CREATE INDEX memory_settings_chat ON memory_settings (setting, chat)",
)


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    id: int
    owner: str
    text: str
    created_at: float
    used_at: float
    uses: int = 0

    @property
    def scope(self) -> MemoryScope:
        kind = self.owner.partition(":")[0]
        return "chat" if kind == "chat" else "profile" if kind == "profile" else "person"


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


def normalised(text: str) -> str:
    return " ".join(text.split())


def digest(text: str) -> str:
    """The duplicate check's key: case and spacing do not make a new entry."""
    return hashlib.sha256(normalised(text).casefold().encode()).hexdigest()


def words(query: str) -> list[str]:
    """The search words of ``query`` (letters and digits only: never search syntax)."""
    return re.findall(r"\w+", query.casefold())[:32]


def in_list(count: int) -> str:
    return ", ".join("?" for _ in range(max(count, 1)))


ADD = (
    "INSERT INTO memory_entries (owner, text, digest, created_at, used_at, uses)"
    " VALUES (?, ?, ?, ?, ?, 0) ON CONFLICT (owner, digest) DO NOTHING"
    " RETURNING id, owner, text, created_at, used_at, uses"
)
COUNT = "SELECT COUNT(*) AS n FROM memory_entries WHERE owner = ?"
COUNTS = "SELECT owner, COUNT(*) AS n FROM memory_entries GROUP BY owner"
SET_ON = (
    "INSERT INTO memory_settings (identity, setting, chat) VALUES (?, ?, ?)"
    " ON CONFLICT (identity, setting, chat) DO NOTHING"
)
SET_OFF = "DELETE FROM memory_settings WHERE identity = ? AND setting = ? AND chat = ?"
SHARERS = "SELECT identity FROM memory_settings WHERE setting = 'share' AND chat = ?"


def duplicate(owners: Sequence[str]) -> str:
    return (
        f"SELECT * FROM memory_entries WHERE owner IN ({in_list(len(owners))}) AND digest = ?"
        " LIMIT 1"
    )


def recent(owners: Sequence[str]) -> str:
    return (
        f"SELECT * FROM memory_entries WHERE owner IN ({in_list(len(owners))})"
        " ORDER BY used_at DESC, uses DESC, id DESC LIMIT ?"
    )


def forget(owners: Sequence[str]) -> str:
    return f"DELETE FROM memory_entries WHERE id = ? AND owner IN ({in_list(len(owners))})"


def forget_all(owners: Sequence[str]) -> str:
    return f"DELETE FROM memory_entries WHERE owner IN ({in_list(len(owners))})"


def settings_of(identities: Sequence[str]) -> str:
    return (
        "SELECT identity, setting, chat FROM memory_settings"
        f" WHERE identity IN ({in_list(len(identities))})"
    )


def used(ids: Sequence[int]) -> str:
    return (
        f"UPDATE memory_entries SET uses = uses + 1, used_at = ? WHERE id IN ({in_list(len(ids))})"
    )


def sqlite_search(owners: Sequence[str]) -> str:
    return (
        "SELECT e.* FROM memory_fts JOIN memory_entries e ON e.id = memory_fts.rowid"
        f" WHERE memory_fts MATCH ? AND e.owner IN ({in_list(len(owners))})"
        " ORDER BY bm25(memory_fts) LIMIT ?"
    )


def fts_query(terms: Sequence[str]) -> str:
    return " OR ".join(f'"{term}"' for term in terms)


def entry(row: Row) -> MemoryEntry:
    return MemoryEntry(
        id=int(row["id"]),
        owner=row["owner"],
        text=row["text"],
        created_at=float(row["created_at"]),
        used_at=float(row["used_at"]),
        uses=int(row["uses"]),
    )


def counts(rows: Sequence[Row]) -> dict[str, int]:
    found: dict[str, int] = {"person": 0, "chat": 0, "profile": 0}
    for row in rows:
        scope = MemoryEntry(0, row["owner"], "", 0.0, 0.0).scope
        found[scope] += int(row["n"])
    return found


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
