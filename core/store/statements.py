"""What every table module of the store shares: :class:`Statement` and the row conventions.

Each table group has one module holding its SQL as values and its row mapping
(:mod:`core.store.sessions`, :mod:`core.store.tool_calls`, :mod:`core.store.platforms`,
:mod:`core.store.outbox`, :mod:`core.store.attachments`, :mod:`core.store.access`,
:mod:`core.store.settings`); :class:`core.store.sqlite.SqliteStore`
runs each statement alone, as its own committed write (the store's one-writer contract), so
another backend can run the same values. Booleans are stored as 0/1, times as REAL UNIX
seconds.

Texts are stored as given: they were made valid where they entered (:mod:`core.text` lists
the edges), so no statement parameter is repaired here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol


class Statement(NamedTuple):
    """One SQL statement with its parameters and what it does (for error messages).

    For a statement that must change exactly one row, ``doing`` names that row (the store
    says "no <doing>" when it is missing)."""

    sql: str
    params: tuple[object, ...]
    doing: str


Query = tuple[str, tuple[object, ...]]
"""A reading statement and its parameters."""


class Row(Protocol):
    """A result row read by column name: ``sqlite3.Row`` and ``asyncpg.Record`` both are."""

    def __getitem__(self, key: str, /) -> Any: ...


def insert_sql(table: str, columns: Sequence[str], suffix: str = "") -> str:
    """``INSERT INTO table (columns) VALUES (?, ...)`` followed by ``suffix``."""
    marks = ", ".join("?" for _ in columns)
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}){suffix}"
