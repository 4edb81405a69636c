"""FileDelivery reads the store only for a session with files to send
(gateway/turns/files.py): a turn that queued no file costs no read, and a file a previous
run left unsent (a crash, a stop) is found by one read at start-up and sent after its
session's next reply."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.agent.turn import TurnResult
from core.attachments import OutgoingFile
from core.store.base import QueuedFile, SessionRecord
from core.store.connection import open_connection
from core.store.sqlite import SqliteStore
from gateway.outbound.delivery import Delivery
from gateway.outbound.directory import ChatDirectory
from gateway.turns.files import FileDelivery, Spool
from tests.gateway.fakes import FakeAdapter, FakeClock

KEY = "fake:dm:7"


class CountingStore(SqliteStore):
    """The real SQLite store, counting the reads FileDelivery makes after a turn."""

    reads = 0

    async def unsent_files(self, session_id: str) -> list[QueuedFile]:
        self.reads += 1
        return await super().unsent_files(session_id)

    async def get_active_session(self, key: str) -> SessionRecord | None:
        self.reads += 1
        return await super().get_active_session(key)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[CountingStore]:
    path = tmp_path / "gateway.db"
    opened = CountingStore(await open_connection(path), path)
    try:
        yield opened
    finally:
        await opened.close()


def delivery_on(store: CountingStore, adapter: FakeAdapter, spool: Path) -> FileDelivery:
    clock = FakeClock()
    directory = ChatDirectory([adapter])  # type: ignore[list-item]
    return FileDelivery(
        store, directory, Delivery(sleep=clock.sleep), sleep=clock.sleep, spool=Spool(spool)
    )


def ended(session: SessionRecord) -> TurnResult:
    return TurnResult(
        turn_id="turn-2", session_id=session.id, status="completed",
        exit_reason="text_response", reply="ok", iterations=1,
    )  # fmt: skip


async def test_a_turn_that_queued_no_file_does_not_read_the_store(
    store: CountingStore, tmp_path: Path
) -> None:
    session = await store.create_session(KEY, "default")
    files = delivery_on(store, FakeAdapter(), tmp_path / "spool")

    store.reads = 0
    await files.after_turn(KEY, ended(session), stopped=False)
    await files.after_turn(KEY, ended(session), stopped=True)

    assert store.reads == 0


async def test_a_file_left_unsent_by_a_stopped_run_is_sent_after_restart(
    store: CountingStore, tmp_path: Path
) -> None:
    session = await store.create_session(KEY, "default")
    spooled = tmp_path / "spool" / "k1" / "chart.png"
    spooled.parent.mkdir(parents=True)
    spooled.write_bytes(b"\x89PNG")
    file = OutgoingFile("k1", str(spooled), "chart.png", "image/png", 4, "photo", "here")
    # the previous run queued it and stopped before sending it
    await store.queue_file(QueuedFile(session.id, "turn-1", "fake", "7", None, file, 1.0))
    adapter = FakeAdapter()
    restarted = delivery_on(store, adapter, tmp_path / "spool")

    await restarted.load_unsent()  # start-up: the one read that finds it
    await restarted.after_turn(KEY, ended(session), stopped=False)

    (sent,) = adapter.of("send_file")
    assert sent.key == "k1" and sent.content == b"\x89PNG"
    assert await store.unsent_files(session.id) == []
    store.reads = 0
    await restarted.after_turn(KEY, ended(session), stopped=False)  # nothing left to send
    assert store.reads == 0 and len(adapter.of("send_file")) == 1
