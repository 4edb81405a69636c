"""The store's memory tables (SQLite migration 12, PostgreSQL 5): what the agent remembers
(``memory_entries``, searched through SQLite FTS5 / PostgreSQL ``tsvector`` + GIN) and each
identity's memory settings (``memory_settings``: memory off, shared in a chat) — their
definition on both backends, their statements and their rows. The migrations read the
definitions (:mod:`core.store.migrations`, :mod:`core.store.pg_migrations`); the memory port
runs the statements (:mod:`core.store.memory`, :mod:`core.store.pg_memory`).

An entry belongs to one *owner*, a string that names its scope (:mod:`core.memory.scopes`):
``person:<platform>:<user>`` (an identity; a linked person's entries are those of all their
identities), ``chat:<chat>`` (a group, channel or thread), ``profile:<name>`` (written by an
operator). A duplicate (the same normalised text for the same owner, :func:`digest`) is not
stored twice.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from core.store.statements import Row

Clock = Callable[[], float]
MemoryScope = Literal["person", "chat", "profile"]
Setting = Literal["off", "share"]
"""``off`` (chat ``""``): nothing is saved for the identity; ``share`` (a chat): the
identity's person entries may be seen in that chat."""

SETTINGS_TABLES: tuple[str, ...] = (
    """CREATE TABLE memory_settings (
        identity TEXT NOT NULL,
        setting TEXT NOT NULL,
        chat TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (identity, setting, chat)
    )""",
    "CREATE INDEX memory_settings_chat ON memory_settings (setting, chat)",
)
"""The same on SQLite and PostgreSQL."""

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
    *SETTINGS_TABLES,
)


PG_TABLES: tuple[str, ...] = (
    """CREATE TABLE memory_entries (
        id BIGSERIAL PRIMARY KEY,
        owner TEXT NOT NULL,
        text TEXT NOT NULL,
        digest TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        used_at DOUBLE PRECISION NOT NULL,
        uses INTEGER NOT NULL DEFAULT 0,
        tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED,
        UNIQUE (owner, digest)
    )""",
    "CREATE INDEX memory_entries_recent ON memory_entries (owner, used_at)",
    "CREATE INDEX memory_entries_tsv ON memory_entries USING GIN (tsv)",
    *SETTINGS_TABLES,
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
