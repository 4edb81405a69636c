"""Fixtures for the engine parts: a real SQLite store with one session and turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.store.sqlite import SqliteStore, open_store


@dataclass(frozen=True)
class TurnRef:
    session_key: str
    session_id: str
    turn_id: str


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await open_store(tmp_path / "store.db")
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def turn(store: SqliteStore) -> TurnRef:
    session = await store.create_session("test:dm:1", "default")
    await store.start_turn(session.id, "turn-1")
    return TurnRef(session.key, session.id, "turn-1")
