"""A streamed message's record in the store (docs/architecture.md §13, "a cut stream"): the
store keeps the message a stream writes into until the stream ends, so a process killed
mid-stream leaves it to be taken over. A stream that ends while its record is still being
written must not leave the record behind — the session's next stream would take over a
message whose answer was already delivered (and edit it instead of sending its own)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from adapters.events import ChatRef
from core.store.base import StreamRecord
from core.store.connection import open_connection
from core.store.sqlite import SqliteStore
from gateway.outbound.pipeline import Outbound
from gateway.turns.streaming import StreamedReply
from tests.gateway.fakes import FakeAdapter
from tests.gateway.test_streaming import EDITS, said

CHAT = ChatRef("fake", "100")
KEY = "fake:dm:100"


class SlowRecords(SqliteStore):
    """A real store whose stream records are written only once :attr:`go` is set — and
    then written even if the caller stopped waiting, as a statement already handed to the
    database's thread is."""

    go: asyncio.Event
    asked: asyncio.Event

    async def put_stream(self, record: StreamRecord) -> None:
        self.asked.set()
        await asyncio.shield(self._written(record))

    async def _written(self, record: StreamRecord) -> None:
        await self.go.wait()
        await super().put_stream(record)


async def test_a_stream_cleared_while_its_record_is_written_leaves_no_record(
    tmp_path: Path,
) -> None:
    path = tmp_path / "commonos.db"
    store = SlowRecords(await open_connection(path), path)
    store.go, store.asked = asyncio.Event(), asyncio.Event()
    try:
        adapter = FakeAdapter(capabilities=EDITS)
        stream = StreamedReply(
            Outbound(adapter), CHAT, "edit", first_update=0.0, session_key=KEY, store=store
        )
        stream(said("The answer is"))
        await asyncio.wait_for(store.asked.wait(), 5)  # the message is sent, its record pending
        assert adapter.of("send")
        ending = asyncio.ensure_future(stream.clear())
        await asyncio.sleep(0)
        store.go.set()
        await asyncio.wait_for(ending, 5)
        assert await store.stream_of(KEY) is None
    finally:
        await store.close()
