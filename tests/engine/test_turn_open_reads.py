"""What opening a turn reads from the store (``docs/turn-loop.md`` §2 step 2, §15).

A session just created has no history to read; the store is asked for a replayed update's
stored message only when an active message of the history carries its origin — a fresh
message opens its turn with no read beyond the session's, a replay still finds its message.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.agent.control import TurnControl
from core.agent.turn import TurnResult, UserMessage
from core.store.base import ActiveSession, StoredMessage
from core.store.connection import open_connection
from core.store.sqlite import SqliteStore
from tests.engine.conftest import KEY, USER, Rig
from tests.support.model_server import reply_hang, reply_text


class ReadCountingStore(SqliteStore):
    """A real SQLite store counting the history reads of opening a turn."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads: Counter[str] = Counter()

    async def load_active_messages(self, session_id: str) -> list[StoredMessage]:
        self.reads["history"] += 1
        return await super().load_active_messages(session_id)

    async def load_active_session(self, key: str) -> ActiveSession | None:
        found = await super().load_active_session(key)
        if found is not None:  # an open session's messages were read with it
            self.reads["history"] += 1
        return found

    async def find_message_by_origin(self, session_id: str, origin: str) -> StoredMessage | None:
        self.reads["find_message_by_origin"] += 1
        return await super().find_message_by_origin(session_id, origin)


@pytest.fixture
async def counting(rig: Rig, tmp_path: Path) -> AsyncIterator[ReadCountingStore]:
    path = tmp_path / "counting.db"
    store = ReadCountingStore(await open_connection(path), path)
    rig.store = store  # the agent is built on first use, on this store
    try:
        yield store
    finally:
        await store.close()


async def turn(rig: Rig, text: str, origin: str) -> TurnResult:
    message = UserMessage(text, sender_id=USER, origin=origin)
    return await rig.agent().run_turn(KEY, message, TurnControl())


async def test_a_new_sessions_first_turn_reads_no_history(
    rig: Rig, counting: ReadCountingStore
) -> None:
    rig.server.script(reply_text("hello"))

    result = await turn(rig, "hi", "telegram:1")

    assert (result.status, result.reply) == ("completed", "hello")
    assert counting.reads == Counter()


async def test_a_fresh_message_reads_the_history_and_looks_no_origin_up(
    rig: Rig, counting: ReadCountingStore
) -> None:
    rig.server.script(reply_text("one"), reply_text("two"))

    await turn(rig, "first", "telegram:1")
    result = await turn(rig, "second", "telegram:2")

    assert (result.status, result.reply) == ("completed", "two")
    assert counting.reads == Counter(history=1)
    assert [m.content for m in await rig.stored()] == ["first", "one", "second", "two"]


async def test_a_replayed_update_is_still_looked_up_and_its_message_reused(
    rig: Rig, counting: ReadCountingStore
) -> None:
    rig.server.script(reply_hang(reply_text("lost")), reply_text("42"))
    cut = asyncio.create_task(turn(rig, "6 x 7?", "telegram:1"))
    await rig.server.wait_for_requests(1)
    cut.cancel()
    await asyncio.wait({cut})

    result = await turn(rig, "6 x 7?", "telegram:1")

    assert (result.status, result.reply) == ("completed", "42")
    assert counting.reads["find_message_by_origin"] == 1
    assert [m.content for m in await rig.stored()] == ["6 x 7?", "42"]


async def test_an_origin_merged_into_a_stored_message_is_looked_up(
    rig: Rig, counting: ReadCountingStore
) -> None:
    rig.server.script(reply_hang(reply_text("lost")), reply_text("both"))
    merged = UserMessage("a\nb", sender_id=USER, origin="telegram:1", also=("telegram:2",))
    cut = asyncio.create_task(rig.agent().run_turn(KEY, merged, TurnControl()))
    await rig.server.wait_for_requests(1)
    cut.cancel()
    await asyncio.wait({cut})

    result = await turn(rig, "b", "telegram:2")  # the second merged update, replayed alone

    assert (result.status, result.reply) == ("completed", "both")
    assert counting.reads["find_message_by_origin"] == 1
    assert [m.content for m in await rig.stored()] == ["a\nb", "both"]
