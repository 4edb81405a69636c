"""Migration 4: every tool call has a status that follows it; older rows read as finished."""

from __future__ import annotations

from pathlib import Path

import aiosqlite
import pytest

from core.store.base import Store, StoreError, ToolCallRecord
from core.store.migrations import (
    INITIAL_SCHEMA,
    LATEST_VERSION,
    MESSAGE_ORIGIN_AND_CARDS,
    apply_migrations,
)
from core.store.sqlite import open_store
from tests.test_store_origin_cards import query


@pytest.fixture
def store(any_store: Store) -> Store:
    """Each test of this module runs on SQLite and on PostgreSQL."""
    return any_store


async def version_2_file(path: Path) -> None:
    """A store file as the version-2 code left it, with one recorded tool call."""
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        await apply_migrations(conn, 0, (INITIAL_SCHEMA, MESSAGE_ORIGIN_AND_CARDS))
        await conn.execute("INSERT INTO sessions VALUES ('s1', 'telegram:dm:1', 'default',"
                           " 1.0, 2.0, NULL, NULL, NULL, NULL)")  # fmt: skip
        await conn.execute("INSERT INTO turns (id, session_id, started_at) VALUES ('t1', 's1', 1)")
        await conn.execute(
            "INSERT INTO tool_calls (call_id, turn_id, session_id, name, arguments, result,"
            " is_error, started_at, finished_at, approval_id, approval_outcome) VALUES"
            " ('c1', 't1', 's1', 'terminal', '{}', 'Not approved (denied)', 1, 1.0, 2.0,"
            " 'a1', 'denied')"
        )


async def test_a_version_2_file_keeps_its_tool_calls_as_finished(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    await version_2_file(path)

    store = await open_store(path)
    try:
        [kept] = await store.list_tool_calls("t1")
        seq = await store.open_tool_call(record("c2", status="requested"))
    finally:
        await store.close()

    assert kept == ToolCallRecord(
        "c1", "t1", "s1", "terminal", "{}", "Not approved (denied)", True, 1.0, 2.0,
        "a1", "denied", "finished",
    )  # fmt: skip
    assert seq == 2  # sequence numbers go on after the copied rows
    assert LATEST_VERSION >= 4
    assert query(path, "SELECT MAX(version) FROM schema_version") == [(LATEST_VERSION,)]


def record(call_id: str, **changes: object) -> ToolCallRecord:
    values: dict[str, object] = {
        "call_id": call_id, "turn_id": "t1", "session_id": "s1", "name": "terminal",
        "arguments": "{}", "result": "", "is_error": False, "started_at": 1.0,
        "finished_at": None,
    }  # fmt: skip
    values.update(changes)
    return ToolCallRecord(**values)  # type: ignore[arg-type]


@pytest.fixture
async def turn(store: Store) -> str:
    session = await store.create_session("telegram:dm:1", "default")
    await store.start_turn(session.id, "t1")
    return session.id


async def test_an_open_call_moves_through_its_states_and_ends(store: Store, turn: str) -> None:
    seq = await store.open_tool_call(record("c1", session_id=turn, status="requested"))
    states = []
    for status in ("awaiting_approval", "started"):
        await store.set_tool_call_status(seq, status)  # type: ignore[arg-type]
        [row] = await store.list_tool_calls("t1")
        states.append((row.status, row.finished_at, row.result))
    ended = record(
        "c1", session_id=turn, arguments='{"x": 1}', result="ok", finished_at=3.0,
        approval_id="a1", approval_outcome="approved", status="finished",
    )  # fmt: skip

    await store.finish_tool_call(seq, ended)

    assert states == [("awaiting_approval", None, ""), ("started", None, "")]
    assert await store.list_tool_calls("t1") == [ended]


async def test_changing_a_call_that_is_not_stored_is_a_store_error(store: Store) -> None:
    with pytest.raises(StoreError, match="no tool call #99"):
        await store.set_tool_call_status(99, "started")
    with pytest.raises(StoreError, match="no tool call #99"):
        await store.finish_tool_call(99, record("c9", status="finished", finished_at=2.0))
