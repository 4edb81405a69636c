"""What every table module of the store shares: :class:`Statement` and the row conventions.

Each table group has one module holding its SQL as values and its row mapping
(:mod:`core.store.sessions`, :mod:`core.store.tool_calls`, :mod:`core.store.platforms`,
:mod:`core.store.outbox`, :mod:`core.store.attachments`, :mod:`core.store.access`,
:mod:`core.store.settings`); :class:`core.store.sqlite.SqliteStore`
runs each statement alone, as its own committed write (the store's one-writer contract), so
another backend can run the same values. Booleans are stored as 0/1, times as REAL UNIX
seconds.

Every text written goes through :func:`storable` first: a lone surrogate (which SQLite's
UTF-8 encoding refuses) becomes U+FFFD, so odd input is stored, never a crashed write.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from core.text import valid_text


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


def storable(params: Sequence[object]) -> tuple[object, ...]:
    """Statement parameters with every ``str`` made encodable (lone surrogates → U+FFFD)."""
    return tuple(valid_text(p) if isinstance(p, str) else p for p in params)
