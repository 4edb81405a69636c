"""The pool of a real PostgreSQL store on a fresh test database (docs/cluster.md).

The cluster primitives run their own SQL on the store's pool (``PgStore.pool``); the
store's migrations made every table they touch (``leases``, ``processes``,
``cluster_mail``, and ``sessions``/``turns``: a session takeover fails running turns).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from core.store.postgres import open_pg_store

STORE_PROCESS = "tests/00000000"


@asynccontextmanager
async def cluster_pool(url: str) -> AsyncIterator[asyncpg.Pool]:
    """The pool of the store opened (and migrated) on ``url``, an empty database."""
    store = await open_pg_store(url, process_id=STORE_PROCESS, pool_size=8)
    try:
        yield store.pool
    finally:
        await store.close()


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
