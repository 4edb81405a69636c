"""The store contract suite's view of a backend: read a value straight from the database
(SQLite file or PostgreSQL) and open the same store again, whichever backend a test got
from the ``any_store`` fixture (tests/support/fixtures.py)."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing

from core.store.base import Store
from core.store.postgres import PgStore, open_pg_store
from core.store.sqlite import SqliteStore, open_store


def _sqlite_scalar(store: SqliteStore, sql: str) -> object:
    with closing(sqlite3.connect(store.path)) as conn:
        return conn.execute(sql).fetchone()[0]


async def scalar(store: Store, sql: str) -> object:
    """The first column of the first row of ``sql`` (no parameters), read independently
    of the store's methods."""
    if isinstance(store, SqliteStore):
        return await asyncio.to_thread(_sqlite_scalar, store, sql)
    assert isinstance(store, PgStore)
    return await store.pool.fetchval(sql)


async def reopen(store: Store) -> Store:
    """Close ``store`` and open the same database again."""
    await store.close()
    if isinstance(store, SqliteStore):
        return await open_store(store.path)
    assert isinstance(store, PgStore)
    return await open_pg_store(store.dsn, process_id=store.process_id, pool_size=2)
