"""Shared pytest fixtures (registered in ``tests/conftest.py``).

* ``model_server`` — a started :class:`ScriptedModelServer` in the test's event loop,
  stopped after the test.
* ``store`` — a real SQLite store in a fresh file under ``tmp_path``, closed after.
* ``pg_server`` — one real PostgreSQL server per pytest worker (tests/support/postgres.py),
  stopped at the end of the session; ``pg_server.url(dbname)``.
* ``pg_url`` — the URL of a fresh, empty database on that server, for one test.
* ``pg_store`` — a :class:`PgStore` on the worker's migrated database, emptied before the
  test (every table, sequences restarted: ~10 ms, where a new database costs ~150 ms),
  closed after.
* ``sqlite_store`` — the same as ``store``, under the name ``any_store`` asks for (test
  modules override ``store`` with ``any_store``).
* ``any_store`` — the store contract's backends, one run each: SQLite, then PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from core.store.base import Store
from core.store.postgres import PgStore, open_pg_store
from core.store.sqlite import SqliteStore, open_store
from tests.support.model_server import ScriptedModelServer
from tests.support.postgres import PostgresServer, emptying_sql


@pytest.fixture
async def model_server() -> AsyncIterator[ScriptedModelServer]:
    async with ScriptedModelServer() as server:
        yield server


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await open_store(tmp_path / "store.db")
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture(scope="session")
def pg_server(worker_id: str) -> Iterator[PostgresServer]:
    server = PostgresServer(label=f"pg-{worker_id}")
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
async def pg_url(pg_server: PostgresServer) -> str:
    return pg_server.url(await pg_server.create_database())


TEST_PROCESS = "test/00000000"
CONTRACT_DATABASE = "contract"


@pytest.fixture(scope="session")
def pg_contract(pg_server: PostgresServer) -> str:
    """The migrated database of ``pg_store`` (one per worker), and the script that empties
    it before each test (``emptying_sql``)."""

    async def migrated() -> str:
        await pg_server.create_database(CONTRACT_DATABASE)
        store = await open_pg_store(pg_server.url(CONTRACT_DATABASE), process_id=TEST_PROCESS)
        try:
            async with store.pool.acquire() as conn:
                return await emptying_sql(conn)
        finally:
            await store.close()

    return asyncio.run(migrated())


@pytest.fixture
async def pg_store(pg_server: PostgresServer, pg_contract: str) -> AsyncIterator[PgStore]:
    url = pg_server.url(CONTRACT_DATABASE)
    opened = await open_pg_store(url, process_id=TEST_PROCESS, pool_size=4)
    try:
        await opened.pool.execute(pg_contract)  # as good as a new database
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await open_store(tmp_path / "store.db")
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture(params=["sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest) -> Store:
    name = "sqlite_store" if request.param == "sqlite" else "pg_store"
    backend: Store = request.getfixturevalue(name)
    return backend
