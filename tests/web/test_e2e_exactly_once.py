"""End to end over HTTP: the gateway stops dead while a reply chunk is in flight — the page
was shown it, the outbox never marked it sent — and the next run replays the message; its
reply comes from the store (no model call) and its chunk is sent again, and the page shows
it once: the feed knows each reply chunk by its outbox key, and the history the new run
loads names the turn each reply belongs to (docs/architecture.md, "Exactly once")."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from core.model.openai_client import OpenAIClient
from core.store.sqlite import SqliteStore
from tests.support.model_server import ScriptedModelServer, reply_text
from tests.web.harness import WAIT, Running, close, compose, new_id, shown_messages, web_config

ANSWER = "Forty-two, on the page once."
CONVERSATION = "conversation-1"


class DiesAtTheSentMark:
    """The real store; the process "dies" as it would write a chunk's sent mark: that
    write never happens (the call waits until the run is torn down)."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner
        self.reached = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def mark_outbox_sent(self, turn_id: str, index: int, message_id: str) -> None:
        self.reached.set()
        await asyncio.Event().wait()


async def run(tmp_path: Path, store: Any, models: ScriptedModelServer) -> Running:
    model = OpenAIClient(base_url=models.url, model="scripted", trust_env=False)
    return await compose(web_config(tmp_path), store, model)


async def the_page(gateway: Running, conversation: str) -> list[dict[str, Any]]:
    """What a page opened now shows (its snapshot, and anything after it)."""
    stream = await gateway.events(conversation)
    try:
        await stream.wait_for(lambda frames: any(f.kind == "snapshot" for f in frames))
        return list(shown_messages(stream.frames).values())
    finally:
        await stream.close()


async def test_a_chunk_in_flight_at_a_crash_is_on_the_page_once_after_the_restart(
    tmp_path: Path, store: SqliteStore, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text(ANSWER))
    dying = DiesAtTheSentMark(store)
    first = await run(tmp_path, dying, model_server)
    try:
        await first.send(CONVERSATION, "what is 6 x 7?", client_id=new_id())
        await asyncio.wait_for(dying.reached.wait(), WAIT)  # shown, not marked sent
        assert [m["role"] for m in await the_page(first, CONVERSATION)] == ["user", "bot"]
    finally:
        await close(first, grace=0)  # the crash: the feed is gone with the process

    second = await run(tmp_path, store, model_server)
    try:
        await second.adapter.drain()  # the replayed message handled
        await second.idle(CONVERSATION)
        bots = [m for m in await the_page(second, CONVERSATION) if m["role"] == "bot"]
        assert [ANSWER in m["html"] for m in bots] == [True]  # once
        assert bots[0]["id"].startswith("c-")  # the reply chunk's own id
        assert len(model_server.requests) == 1
        assert await store.unfinished_inbound("web") == []
    finally:
        await close(second)
