"""Shared pytest fixtures (registered in ``tests/conftest.py``).

* ``model_server`` — a started :class:`ScriptedModelServer` in the test's event loop,
  stopped after the test.
* ``store`` — a real SQLite store in a fresh file under ``tmp_path``, closed after.
* ``pg_server`` — one real PostgreSQL server per pytest worker (tests/support/postgres.py),
  stopped at the end of the session; ``pg_server.url(dbname)``.
* ``pg_url`` — the URL of a fresh, empty database on that server, for one test.
* ``pg_store`` — a :class:`PgStore` on a fresh database copied from a migrated template
  (``CREATE DATABASE ... TEMPLATE``: no migration per test), closed after.
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
from tests.support.postgres import PostgresServer


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
MIGRATED_TEMPLATE = "migrated"


@pytest.fixture(scope="session")
def pg_migrated(pg_server: PostgresServer) -> str:
    """A database holding the PostgreSQL store's schema, the template of ``pg_store``."""

    async def migrated() -> None:
        await pg_server.create_database(MIGRATED_TEMPLATE)
        store = await open_pg_store(pg_server.url(MIGRATED_TEMPLATE), process_id=TEST_PROCESS)
        await store.close()

    asyncio.run(migrated())
    return MIGRATED_TEMPLATE


@pytest.fixture
async def pg_store(pg_server: PostgresServer, pg_migrated: str) -> AsyncIterator[PgStore]:
    name = await pg_server.create_database(template=pg_migrated)
    opened = await open_pg_store(pg_server.url(name), process_id=TEST_PROCESS, pool_size=4)
    try:
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
