"""Schema version 2: message origins and approval card locations, and the migration of a
version-1 file in place. Every test works on a real SQLite file under ``tmp_path``."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import aiosqlite
import pytest

from core.store.base import ApprovalCard, ApprovalRecord, SessionRecord, Store, StoreError
from core.store.migrations import INITIAL_SCHEMA, LATEST_VERSION, MIGRATIONS, apply_migrations
from core.store.sqlite import SqliteStore, open_store
from core.types import ChatMessage


@pytest.fixture
def store(any_store: Store) -> Store:
    """Each test of this module runs on SQLite and on PostgreSQL."""
    return any_store


def query(path: Path, sql: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql).fetchall()


async def version_1_file(path: Path) -> None:
    """A store file as the version-1 code left it: one session, a message, an approval."""
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        await apply_migrations(conn, 0, (INITIAL_SCHEMA,))
        await conn.execute("INSERT INTO sessions VALUES ('s1', 'telegram:dm:1', 'default',"
                           " 1.0, 2.0, NULL, NULL, NULL, NULL)")  # fmt: skip
        await conn.execute("INSERT INTO turns (id, session_id, started_at) VALUES ('t1', 's1', 1)")
        await conn.execute(
            "INSERT INTO messages (session_id, turn_id, role, content, created_at)"
            " VALUES ('s1', 't1', 'user', 'kept across the upgrade', 1.5)"
        )
        await conn.execute(
            "INSERT INTO approvals (id, session_id, session_key, turn_id, tool, arguments,"
            " prompt, requested_at) VALUES ('a1', 's1', 'telegram:dm:1', 't1', 'terminal',"
            " '{}', 'Run?', 1.6)"
        )


async def test_a_version_1_file_migrates_in_place_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    await version_1_file(path)
    assert query(path, "SELECT MAX(version) FROM schema_version") == [(1,)]

    store = await open_store(path)
    try:
        [stored] = await store.load_active_messages("s1")
        approval = await store.get_approval("a1")
        session = await store.get_active_session("telegram:dm:1")
    finally:
        await store.close()

    every = [(migration.version,) for migration in MIGRATIONS]
    assert every[-1][0] == LATEST_VERSION and every[:2] == [(1,), (2,)]
    assert query(path, "SELECT version FROM schema_version ORDER BY version") == every
    assert (stored.message, stored.origin) == (ChatMessage("user", "kept across the upgrade"), None)
    assert approval is not None and (approval.state, approval.card) == ("pending", None)
    assert session is not None and session.id == "s1"


async def test_a_migrated_file_stores_origins_and_cards(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    await version_1_file(path)
    store = await open_store(path)
    try:
        await store.append_message("s1", "t1", ChatMessage("user", "again"), origin="telegram:9")
        await store.set_approval_card("a1", "telegram", "100", None, "7")
        found = await store.find_message_by_origin("s1", "telegram:9")
        approval = await store.get_approval("a1")
    finally:
        await store.close()
    assert found is not None and found.message.content == "again"
    assert approval is not None and approval.card == ApprovalCard("telegram", "100", None, "7")


async def test_find_message_by_origin_is_per_session_and_earliest_first(
    store: Store,
) -> None:
    first = await store.create_session("telegram:dm:1", "default")
    other = await store.create_session("telegram:dm:2", "default")
    await store.append_message(first.id, None, ChatMessage("user", "plain"))
    wanted = await store.append_message(
        first.id, None, ChatMessage("user", "hi"), origin="telegram:5"
    )
    await store.append_message(first.id, None, ChatMessage("user", "dup"), origin="telegram:5")

    found = await store.find_message_by_origin(first.id, "telegram:5")

    assert found is not None and (found.id, found.origin) == (wanted, "telegram:5")
    assert found.message == ChatMessage("user", "hi")
    assert await store.find_message_by_origin(other.id, "telegram:5") is None
    assert await store.find_message_by_origin(first.id, "telegram:6") is None
    loaded = await store.load_active_messages(first.id)
    assert [m.origin for m in loaded] == [None, "telegram:5", "telegram:5"]


async def test_origin_lookup_uses_the_index(sqlite_store: SqliteStore) -> None:
    plan = query(
        sqlite_store.path,
        "EXPLAIN QUERY PLAN SELECT * FROM messages WHERE session_id = 's' AND origin = 'o'",
    )
    assert "messages_by_origin" in str(plan)


async def session_with_approval(store: Store) -> SessionRecord:
    session = await store.create_session("telegram:dm:1", "default")
    await store.start_turn(session.id, "t1")
    record = ApprovalRecord("a1", session.id, session.key, "t1", "terminal", "{}", "Run?", 1.0)
    await store.create_approval(record)
    return session


async def test_an_approval_card_location_is_kept_with_a_thread(store: Store) -> None:
    await session_with_approval(store)
    assert (await store.pending_approvals())[0].card is None

    await store.set_approval_card("a1", "slack", "C1", "1700.1", "1700.2")

    [pending] = await store.pending_approvals()
    assert pending.card == ApprovalCard("slack", "C1", "1700.1", "1700.2")


async def test_a_card_for_an_unknown_approval_is_an_error(store: Store) -> None:
    with pytest.raises(StoreError, match="no approval 'nope'"):
        await store.set_approval_card("nope", "telegram", "1", None, "2")
