"""Shared pytest fixtures (registered in ``tests/conftest.py``).

* ``model_server`` — a started :class:`ScriptedModelServer` in the test's event loop,
  stopped after the test.
* ``store`` — a real SQLite store in a fresh file under ``tmp_path``, closed after.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.store.sqlite import SqliteStore, open_store
from tests.support.model_server import ScriptedModelServer


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
