"""A pool on a fresh test database holding the cluster tables (docs/cluster.md).

The cluster primitives run their own SQL on the store's pool; these tests give them the
cluster tables (:data:`core.store.pg_cluster_tables.CLUSTER_TABLES`) and the two store
tables they touch (``sessions``, ``turns``: a session takeover fails running turns),
with the SQLite schema's columns in PostgreSQL types.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from core.store.pg_cluster_tables import CLUSTER_TABLES

STORE_TABLES = (
    """CREATE TABLE sessions (
        id TEXT PRIMARY KEY, key TEXT NOT NULL, profile TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, last_active_at DOUBLE PRECISION NOT NULL,
        ended_at DOUBLE PRECISION)""",
    """CREATE TABLE turns (
        id TEXT PRIMARY KEY, session_id TEXT NOT NULL REFERENCES sessions (id),
        started_at DOUBLE PRECISION NOT NULL, finished_at DOUBLE PRECISION,
        status TEXT NOT NULL DEFAULT 'running', exit_reason TEXT,
        iterations INTEGER NOT NULL DEFAULT 0, error TEXT)""",
)


@asynccontextmanager
async def cluster_pool(url: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool on ``url`` (an empty database) after creating the tables."""
    pool = await asyncpg.create_pool(url, min_size=1, max_size=8)
    try:
        async with pool.acquire() as conn:
            for ddl in (*STORE_TABLES, *CLUSTER_TABLES):
                if not ddl.startswith("ALTER TABLE turns"):
                    await conn.execute(ddl)
        yield pool
    finally:
        await pool.close()


async def add_running_turn(pool: asyncpg.Pool, key: str, turn_id: str) -> None:
    """A session with ``key`` and one turn of it still running."""
    await pool.execute(
        "INSERT INTO sessions (id, key, profile, created_at, last_active_at)"
        " VALUES ($1, $2, 'default', 0, 0) ON CONFLICT DO NOTHING",
        f"s-{key}",
        key,
    )
    await pool.execute(
        "INSERT INTO turns (id, session_id, started_at) VALUES ($1, $2, 0)",
        turn_id,
        f"s-{key}",
    )


async def expire(pool: asyncpg.Pool, name: str) -> None:
    """Make lease ``name`` expired on the server clock (as if its owner stopped renewing)."""
    await pool.execute(
        "UPDATE leases SET expires_at = clock_timestamp() - interval '1 second' WHERE name = $1",
        name,
    )
