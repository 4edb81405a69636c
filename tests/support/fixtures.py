"""Shared pytest fixtures (registered in ``tests/conftest.py``).

* ``model_server`` — a started :class:`ScriptedModelServer` in the test's event loop,
  stopped after the test.
* ``store`` — a real SQLite store in a fresh file under ``tmp_path``, closed after.
* ``pg_server`` — one real PostgreSQL server per pytest worker (tests/support/postgres.py),
  stopped at the end of the session; ``pg_server.url(dbname)``.
* ``pg_url`` — the URL of a fresh, empty database on that server, for one test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

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
