"""The store as a database: opening, migrations, refusals, closing, concurrency, text.

The tests about the SQLite file itself work on a real file under ``tmp_path``; the
contract ones (``any_store``) run on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import aiosqlite
import pytest

from core.store.base import Store, StoreError
from core.store.migrations import LATEST_VERSION, MIGRATIONS, Migration, apply_migrations
from core.store.sqlite import SqliteStore, open_store
from core.types import ChatMessage, ToolCall
from tests.support.store_backends import reopen


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "home" / "data" / "commonos.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await open_store(db_path)
    yield opened
    await opened.close()


def query(path: Path, sql: str) -> list[tuple[object, ...]]:
    """Read the file with plain sqlite3, independently of the store."""
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql).fetchall()


def contents(path: Path) -> bytes:
    """The file's bytes, to prove a refused file was left exactly as it was."""
    return path.read_bytes()


def sibling_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


@pytest.fixture
def empty_file(db_path: Path) -> Path:
    db_path.parent.mkdir(parents=True)
    db_path.touch()
    return db_path


@pytest.fixture
def text_file(db_path: Path) -> Path:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"not a database, just notes\n" * 200)
    return db_path


@pytest.fixture
def other_program_db(db_path: Path) -> Path:
    db_path.parent.mkdir(parents=True)
    with closing(sqlite3.connect(db_path)) as conn, conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('keep me')")
    return db_path


async def test_open_creates_parent_dirs_and_records_schema_version(db_path: Path) -> None:
    store = await open_store(db_path)
    await store.close()

    assert sibling_files(db_path) == ["commonos.db"]
    assert query(db_path, "SELECT MAX(version) FROM schema_version") == [(LATEST_VERSION,)]


async def test_empty_file_is_initialised_as_a_new_store(empty_file: Path) -> None:
    store = await open_store(empty_file)
    await store.close()

    assert query(empty_file, "SELECT MAX(version) FROM schema_version") == [(LATEST_VERSION,)]


async def test_reopen_applies_nothing_and_keeps_data(db_path: Path) -> None:
    first = await open_store(db_path)
    session = await first.create_session("telegram:1", "default")
    await first.append_message(session.id, None, ChatMessage(role="user", content="hello"))
    await first.close()

    second = await open_store(db_path)
    try:
        assert await second.get_active_session("telegram:1") == session
        [stored] = await second.load_active_messages(session.id)
        assert stored.message == ChatMessage(role="user", content="hello")
    finally:
        await second.close()
    assert query(db_path, "SELECT COUNT(*) FROM schema_version") == [(len(MIGRATIONS),)]


async def test_store_file_is_in_wal_mode(store: SqliteStore, db_path: Path) -> None:
    assert query(db_path, "PRAGMA journal_mode") == [("wal",)]


async def test_foreign_keys_are_enforced(any_store: Store) -> None:
    with pytest.raises(StoreError, match="cannot start turn 't1' in session 'nope'"):
        await any_store.start_turn("nope", "t1")


async def test_newer_schema_is_refused_and_file_untouched(db_path: Path) -> None:
    store = await open_store(db_path)
    await store.close()
    with closing(sqlite3.connect(db_path)) as conn, conn:
        conn.execute(
            "INSERT INTO schema_version VALUES (?, 'from the future', 0)", (LATEST_VERSION + 1,)
        )
    before = contents(db_path)

    with pytest.raises(StoreError) as refused:
        await open_store(db_path)

    message = str(refused.value)
    assert str(db_path) in message
    assert f"schema version {LATEST_VERSION + 1}" in message
    assert f"({LATEST_VERSION})" in message
    assert contents(db_path) == before


async def test_file_that_is_not_sqlite_is_refused_and_untouched(text_file: Path) -> None:
    before = contents(text_file)

    with pytest.raises(StoreError, match=f"^{re.escape(str(text_file))} is not a SQLite database$"):
        await open_store(text_file)

    assert contents(text_file) == before
    assert sibling_files(text_file) == ["commonos.db"]


async def test_sqlite_file_of_another_program_is_refused_and_untouched(
    other_program_db: Path,
) -> None:
    before = contents(other_program_db)

    with pytest.raises(StoreError, match="is a SQLite database but not a CommonOS store"):
        await open_store(other_program_db)

    assert contents(other_program_db) == before
    assert query(other_program_db, "SELECT body FROM notes") == [("keep me",)]


async def test_directory_in_place_of_the_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=f"cannot use {re.escape(str(tmp_path))} as the store"):
        await open_store(tmp_path)


async def test_failed_migration_rolls_back_to_previous_version(tmp_path: Path) -> None:
    path = tmp_path / "partial.db"
    good = Migration(LATEST_VERSION + 1, "add table", ("CREATE TABLE extra (x INTEGER)",))
    bad = Migration(
        LATEST_VERSION + 2, "broken", ("CREATE TABLE half (x INTEGER)", "THIS IS NOT SQL")
    )

    async with aiosqlite.connect(path, isolation_level=None) as conn:
        with pytest.raises(sqlite3.OperationalError):
            await apply_migrations(conn, 0, (*MIGRATIONS, good, bad))

    assert query(path, "SELECT MAX(version) FROM schema_version") == [(LATEST_VERSION + 1,)]
    tables = {row[0] for row in query(path, "SELECT name FROM sqlite_master")}
    assert "extra" in tables
    assert "half" not in tables


async def test_close_is_idempotent_and_later_calls_raise(any_store: Store) -> None:
    store = any_store
    await store.close()
    await store.close()

    with pytest.raises(StoreError, match="is closed"):
        await store.get_active_session("k")
    with pytest.raises(StoreError, match="is closed"):
        await store.create_session("k", "default")


async def test_concurrent_appends_are_all_stored_in_order(any_store: Store) -> None:
    store = any_store
    session = await store.create_session("k", "default")
    texts = [f"message {i} " + "x" * i for i in range(200)]

    ids = await asyncio.gather(
        *(store.append_message(session.id, None, ChatMessage("user", t)) for t in texts)
    )

    loaded = await store.load_active_messages(session.id)
    loaded_ids = [m.id for m in loaded]
    assert loaded_ids == sorted(set(loaded_ids))
    assert sorted(ids) == loaded_ids
    assert {m.id: m.message.content for m in loaded} == dict(zip(ids, texts, strict=True))


ODD_TEXTS = [
    "emoji 👩‍👩‍👧‍👦 🏳️‍🌈 🇯🇵",
    "RTL שָׁלוֹם עליכם مرحبا بالعالم",
    "controls \x01\x07\x08\t\x0b\x0c\r\n\x1b[31m\x7f",
    "combining e\u0301 and zero width \u200b\u200d\ufeff",
    "ключ 汉字 ﷽ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "y" * 100_000 + "🙂",
]


@pytest.mark.parametrize("text", ODD_TEXTS, ids=["emoji", "rtl", "controls", "zw", "mix", "100k"])
async def test_odd_text_is_stored_intact(any_store: Store, text: str) -> None:
    store = any_store
    session = await store.create_session(text, "default")
    message = ChatMessage(
        role="assistant",
        content=[{"type": "text", "text": text}],
        tool_calls=(ToolCall(id=text[:50], name="terminal", arguments=text),),
        name=text[:64],
    )
    await store.append_message(session.id, None, message)
    await store.append_message(session.id, None, ChatMessage("user", text))

    reopened = await reopen(store)
    try:
        assert (await reopened.get_active_session(text)) == session
        stored = [m.message for m in await reopened.load_active_messages(session.id)]
    finally:
        await reopened.close()
    assert stored == [message, ChatMessage("user", text)]
