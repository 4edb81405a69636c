"""Fixtures for the engine parts: a real SQLite store with one session and turn."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from core.store.sqlite import SqliteStore


@dataclass(frozen=True)
class TurnRef:
    session_key: str
    session_id: str
    turn_id: str


@pytest.fixture
async def turn(store: SqliteStore) -> TurnRef:
    session = await store.create_session("test:dm:1", "default")
    await store.start_turn(session.id, "turn-1")
    return TurnRef(session.key, session.id, "turn-1")
