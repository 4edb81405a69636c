"""The reply's text live over SSE: a streaming profile's text reaches the page as ``delta``
events before the rendered reply, which arrives once (``endsLive``), also for a page that
reconnects with ``Last-Event-ID``; what is shown live is redacted."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from core.model.openai_client import OpenAIClient
from core.redaction import remember_secrets
from tests.support.model_server import ScriptedModelServer, reply_text
from tests.web.conftest import WebGatewayFactory
from tests.web.harness import Frame, Running, new_id

REPLY = "The answer is forty two."


def streaming(tmp_path: Path) -> dict[str, Any]:
    profile = {"workspace": str(tmp_path / "workspace"), "stream": True}
    return {"profiles": {"default": profile}}


async def start(
    web_gateway: WebGatewayFactory, server: ScriptedModelServer, tmp_path: Path
) -> Running:
    model = OpenAIClient(base_url=server.url, model="scripted", trust_env=False)
    return await web_gateway(model=model, extra=streaming(tmp_path))


def live_text(frames: list[Frame]) -> str:
    """The live reply as the page shows it after ``frames``."""
    text = ""
    for frame in frames:
        if frame.kind == "delta":
            text += frame.data["text"]
        elif frame.kind == "live":
            text = frame.data["text"]
        elif frame.kind in ("message", "edit") and frame.data.get("endsLive"):
            text = ""
    return text


def replies(frames: list[Frame], text: str) -> list[Frame]:
    return [f for f in frames if f.kind == "message" and text in f.data.get("html", "")]


async def test_deltas_come_before_the_reply_which_arrives_once_after_a_reload(
    web_gateway: WebGatewayFactory, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    release = asyncio.Event()
    model_server.script(
        reply_text(
            REPLY, chunks=["The ", "answer ", "is ", "forty ", "two."], stall_after=3, until=release
        )
    )
    gateway = await start(web_gateway, model_server, tmp_path)
    conversation = new_id()
    first = await gateway.events(conversation)
    await gateway.send(conversation, "what is it?")

    await first.wait_for(lambda frames: live_text(frames) == "The answer ")
    assert all(f.id is None for f in first.frames if f.kind == "delta")  # never replayed
    await first.close()
    seen = [f.id for f in first.frames if f.id is not None][-1]
    reloaded = await gateway.events(conversation, last_event_id=seen)
    await reloaded.wait_for(lambda frames: live_text(frames) == "The answer ")
    release.set()
    await reloaded.wait_for(lambda frames: replies(frames, "forty two"))
    await gateway.idle(conversation)

    frames = reloaded.frames
    [reply] = replies(frames, "forty two")
    assert reply.data["endsLive"] is True and reply.data["role"] == "bot"
    at_reply = frames.index(reply)
    assert [f for f in frames[at_reply:] if f.kind in ("delta", "live")] == []
    assert live_text(frames[:at_reply]).startswith("The answer ")
    assert replies(first.frames, "forty two") == []
    last_id = [f.id for f in frames if f.id is not None][-1]
    await reloaded.close()

    again = await gateway.events(conversation, last_event_id=last_id)
    resumed_live = await again.wait_for(lambda fs: next((f for f in fs if f.kind == "live"), None))
    assert resumed_live.data == {"text": ""}
    assert replies(again.frames, "forty two") == []
    await again.close()
    fresh = await gateway.events(conversation)
    snapshot = await fresh.wait_for(lambda fs: fs and fs[0])
    bots = [m for m in snapshot.data["messages"] if m["role"] == "bot"]
    assert len(bots) == 1 and "forty two" in bots[0]["html"]
    assert "endsLive" not in bots[0]
    await fresh.close()


async def test_a_secret_split_across_fragments_is_never_shown_live(
    web_gateway: WebGatewayFactory, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    release = asyncio.Event()
    secret = "sk-live-configured-key-abcdefghijklmn"
    remember_secrets([secret])
    model_server.script(
        reply_text(
            f"key {secret} done.",
            chunks=["key ", secret[:12], secret[12:] + " ", "done."],
            stall_after=3,  # role, "key ", the secret's first part
            until=release,
        )
    )
    gateway = await start(web_gateway, model_server, tmp_path)
    conversation = new_id()
    stream = await gateway.events(conversation)
    await gateway.send(conversation, "show the key")

    await stream.wait_for(lambda frames: live_text(frames) == "key ")
    release.set()
    await stream.wait_for(lambda frames: replies(frames, "done."))

    live = [f.data["text"] for f in stream.frames if f.kind in ("delta", "live")]
    assert "".join(live) == "key [REDACTED] "
    assert not any(secret[:6] in text for text in live)
    await stream.close()
