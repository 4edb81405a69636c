"""PostgreSQL-only store behaviour (issue 23): the test server itself, fencing, NUL text,
unreachable servers, concurrent migrations, newer schemas, fail_running_turns."""

from __future__ import annotations

import asyncpg

from tests.support.postgres import PostgresServer


async def test_the_test_server_gives_each_test_a_fresh_database(
    pg_server: PostgresServer, pg_url: str
) -> None:
    conn = await asyncpg.connect(pg_url)
    try:
        tables = await conn.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        settings = {
            name: await conn.fetchval(f"SHOW {name}")
            for name in ("fsync", "synchronous_commit", "full_page_writes", "max_connections")
        }
    finally:
        await conn.close()
    assert tables == 0
    assert settings == {
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
        "max_connections": "200",
    }
    assert pg_url.startswith(f"postgresql://postgres@127.0.0.1:{pg_server.port}/t_")

