"""Schema version 7: the command set each platform last registered, per scope, in its own
table (``command_syncs``), and the migration of the markers earlier versions kept in the
inbound queue. Every test works on a real SQLite file under ``tmp_path``."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import aiosqlite
import pytest

from core.store.base import Store
from core.store.migrations import COMMAND_SYNCS, MIGRATIONS, apply_migrations
from core.store.sqlite import open_store
from tests.support.store_backends import scalar


@pytest.fixture
def store(any_store: Store) -> Store:
    """Each test of this module runs on SQLite and on PostgreSQL."""
    return any_store


def query(path: Path, sql: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql).fetchall()


async def test_the_last_synced_set_is_kept_per_platform_and_scope(store: Store) -> None:
    assert await store.synced_commands("discord", "global") is None
    await store.set_synced_commands("discord", "global", "d1")
    await store.set_synced_commands("discord", "123", "g1")
    await store.set_synced_commands("discord", "global", "d2")
    assert await store.synced_commands("discord", "global") == "d2"
    assert await store.synced_commands("discord", "123") == "g1"
    assert await store.synced_commands("slack", "global") is None


async def test_recording_a_sync_leaves_the_inbound_queue_empty(store: Store) -> None:
    await store.set_synced_commands("discord", "global", "d1")
    assert await scalar(store, "SELECT COUNT(*) FROM inbound") == 0


async def version_6_file(path: Path) -> None:
    """A store as version 6 left it: sync markers as done inbound rows, and a real update."""
    before = tuple(m for m in MIGRATIONS if m.version < COMMAND_SYNCS.version)
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        await apply_migrations(conn, 0, before)
        rows = [
            ("discord-commands", "global:old", "", "{}", "done", 1.0),
            ("discord-commands", "global:new", "", "{}", "done", 2.0),
            ("discord-commands", "555:guildset", "", "{}", "done", 1.5),
            ("telegram", "7", "telegram:dm:1", '{"update_id": 7}', "pending", 3.0),
        ]
        await conn.executemany("INSERT INTO inbound VALUES (?, ?, ?, ?, ?, ?)", rows)


async def test_a_version_6_file_moves_its_markers_out_of_the_inbound_queue(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v6.db"
    await version_6_file(path)
    store = await open_store(path)
    try:
        synced = [await store.synced_commands("discord", s) for s in ("global", "555")]
        unfinished = await store.unfinished_inbound("telegram")
    finally:
        await store.close()
    assert synced == ["new", "guildset"]  # the latest set of each scope
    assert query(path, "SELECT platform, update_id FROM inbound") == [("telegram", "7")]
    assert [record.update_id for record in unfinished] == ["7"]
