"""Schema version 8: the files of inbound messages (``attachments``) and the outbox for
files the agent sends (``queued_files``). Every test works on a real SQLite file under
``tmp_path``."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import aiosqlite
import pytest

from core.attachments import Attachment, OutgoingFile
from core.store.base import AttachmentRecord, QueuedFile, Store, StoreError
from core.store.migrations import ATTACHMENTS_AND_FILES, MIGRATIONS, apply_migrations
from core.store.sqlite import open_store

ORIGIN = "telegram:501"
KEY = "telegram:dm:42"


@pytest.fixture
def store(any_store: Store) -> Store:
    """Each test of this module runs on SQLite and on PostgreSQL."""
    return any_store


def offered(name: str = "shot.png", kind: str = "image") -> Attachment:
    return Attachment(
        kind="image" if kind == "image" else "document",
        name=name,
        mime="image/png",
        size=0,
        source="file-id-1",
    )


def record(index: int, attachment: Attachment, state: str = "downloading") -> AttachmentRecord:
    assert state in ("downloading", "saved", "failed")
    return AttachmentRecord(ORIGIN, index, KEY, attachment, state)  # type: ignore[arg-type]


def queued(key: str, queued_at: float, session_id: str = "s1") -> QueuedFile:
    file = OutgoingFile(key, f"/ws/.outbox/{key}-r.csv", "r.csv", "text/csv", 12, "document")
    return QueuedFile(session_id, "turn-1", "telegram", "42", None, file, queued_at)


async def test_a_saved_file_replaces_its_downloading_row(store: Store) -> None:
    await store.put_attachment(record(0, offered()))
    saved = Attachment(
        "voice",
        "note.ogg",
        "audio/ogg",
        2048,
        "file-id-1",
        "ab" * 32,
        "inbox/note.ogg",
        transcript="hello there",
    )
    await store.put_attachment(record(0, saved, "saved"))
    [row] = await store.attachments_of(ORIGIN)
    assert (row.state, row.attachment, row.session_key) == ("saved", saved, KEY)
    assert row.attachment.saved and row.message_id is None


async def test_the_files_of_one_message_come_back_in_order_and_alone(
    store: Store,
) -> None:
    await store.put_attachment(record(1, offered("b.png")))
    await store.put_attachment(record(0, offered("a.png")))
    other = AttachmentRecord("telegram:502", 0, KEY, offered("c.png"), "downloading")
    await store.put_attachment(other)
    assert [r.attachment.name for r in await store.attachments_of(ORIGIN)] == ["a.png", "b.png"]
    assert await store.attachments_of("telegram:999") == []


async def test_linking_names_the_stored_message_and_a_rewrite_keeps_the_link(
    store: Store,
) -> None:
    await store.put_attachment(record(0, offered()))
    await store.link_attachments(ORIGIN, 17)
    await store.put_attachment(record(0, offered(), "failed"))  # rewritten after the link
    [row] = await store.attachments_of(ORIGIN)
    assert (row.message_id, row.state) == (17, "failed")
    await store.link_attachments("telegram:none", 18)  # a message without files: no error


async def test_a_file_key_is_queued_once(store: Store) -> None:
    assert await store.queue_file(queued("k1", 1.0)) is True
    assert await store.queue_file(queued("k1", 5.0)) is False
    [only] = await store.unsent_files("s1")
    assert (only.file.key, only.queued_at, only.in_flight) == ("k1", 1.0, False)


async def test_unsent_files_are_the_sessions_own_oldest_first_until_sent_or_failed(
    store: Store,
) -> None:
    for key, at in (("late", 3.0), ("early", 1.0), ("sent", 2.0), ("refused", 2.5)):
        await store.queue_file(queued(key, at))
    await store.queue_file(queued("elsewhere", 0.5, session_id="s2"))
    await store.mark_file_sent("sent", "m-9")
    await store.mark_file_failed("refused", "too large for the chat")
    assert [q.file.key for q in await store.unsent_files("s1")] == ["early", "late"]


async def test_an_upload_started_and_never_marked_sent_reads_back_in_flight(
    store: Store,
) -> None:
    await store.queue_file(queued("k1", 1.0))
    await store.mark_file_started("k1")
    [first] = await store.unsent_files("s1")
    await store.mark_file_started("k1")  # a retry after a restart keeps the first start
    [again] = await store.unsent_files("s1")
    assert first.in_flight and first.started_at == again.started_at
    assert first.file == queued("k1", 1.0).file


async def test_marking_an_unknown_file_is_a_store_error(store: Store) -> None:
    with pytest.raises(StoreError, match="queued file nope"):
        await store.mark_file_sent("nope", "m-1")


async def test_files_and_marks_survive_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "commonos.db"
    first = await open_store(path)
    await first.put_attachment(record(0, offered()))
    await first.queue_file(queued("k1", 1.0))
    await first.mark_file_started("k1")
    await first.close()
    second = await open_store(path)
    try:
        files = await second.attachments_of(ORIGIN)
        [unsent] = await second.unsent_files("s1")
    finally:
        await second.close()
    assert [f.attachment.name for f in files] == ["shot.png"] and unsent.in_flight


async def version_7_file(path: Path) -> None:
    """A store as version 7 left it: a session with one message."""
    before = tuple(m for m in MIGRATIONS if m.version < ATTACHMENTS_AND_FILES.version)
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        await apply_migrations(conn, 0, before)
        await conn.execute(
            "INSERT INTO sessions (id, key, profile, created_at, last_active_at)"
            " VALUES ('s1', ?, 'default', 1.0, 1.0)",
            (KEY,),
        )
        await conn.execute(
            "INSERT INTO messages (session_id, role, content, created_at, origin)"
            " VALUES ('s1', 'user', 'kept', 1.0, ?)",
            (ORIGIN,),
        )


async def test_a_version_7_file_gains_the_tables_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "v7.db"
    await version_7_file(path)
    store = await open_store(path)
    try:
        [message] = await store.load_active_messages("s1")
        await store.put_attachment(record(0, offered()))
        await store.link_attachments(ORIGIN, message.id)
        [row] = await store.attachments_of(ORIGIN)
    finally:
        await store.close()
    assert (message.message.content, message.origin) == ("kept", ORIGIN)
    assert row.message_id == message.id
    with closing(sqlite3.connect(path)) as conn:
        [version] = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    assert version >= ATTACHMENTS_AND_FILES.version  # later migrations apply too
