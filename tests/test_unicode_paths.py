"""Odd text through a whole turn: lone surrogates are repaired at the edges, the rest is kept.

A lone surrogate cannot be encoded as UTF-8; unrepaired it crashed the store write (turn
lost) or the request body. Emoji, right-to-left, zero-width and control characters are
valid text and must come back byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.discord.normalize import Envelope
from adapters.web.inbox import WebMessage
from core.agent.profile import AgentProfile
from core.approvals import Approvals
from core.attachments import Attachment
from core.hooks.registry import HookRegistry
from core.model.openai_client import OpenAIClient
from core.store.sqlite import SqliteStore
from core.text import valid_text
from core.tools.base import ToolRegistry
from core.tracing import session_hash
from core.types import ChatMessage
from tests.engine.conftest import FakeClock, HookLog, Presenter, Rig, echo_tool
from tests.support.model_replies import without_clock_note
from tests.support.model_server import (
    ScriptedModelServer,
    reply_sse,
    reply_text,
    reply_tool_call,
)

LONE = "\ud800"
FFFD = "\ufffd"
ODD_BUT_VALID = (
    "مرحبا بالعالم · שלום "  # right-to-left
    "zero\u200bwidth\u200d\u200e\u2060 · "  # zero-width space/joiner, LRM, word joiner
    "bell\x07 esc\x1b[0m tab\t cr\r · "  # control characters (no NUL)
    "👩‍💻 🇯🇵 👍🏽 𝔘𝔫𝔦"  # ZWJ sequence, flag, skin tone, astral plane
)


@pytest.fixture
async def rig(
    store: SqliteStore, model_server: ScriptedModelServer, tmp_path: Path
) -> AsyncIterator[Rig]:
    client = OpenAIClient(
        base_url=model_server.url, model="test-model", timeout=5.0, trust_env=False
    )
    hooks = HookRegistry()
    approvals = Approvals(store, Presenter(), timeout=lambda key: 30.0)
    profile = AgentProfile(name="t", model="test-model", soul="You are Test.", workspace=tmp_path)
    built = Rig(
        store, model_server, client, hooks, HookLog(hooks), Presenter(), approvals,
        FakeClock(), ToolRegistry([echo_tool()]), profile,
    )  # fmt: skip
    try:
        yield built
    finally:
        await approvals.aclose()
        await client.aclose()


def entered(text: str) -> str:
    """``text`` as a platform event carries it into the gateway: through an adapter's
    normalize step (the web page's message, repaired where it enters: core/text.py)."""
    return WebMessage("conversation", "1", text).text


def sent_bodies(rig: Rig) -> list[Any]:
    """What the model server received, decoded strictly: fails unless valid UTF-8 JSON."""
    return [
        json.loads(request.raw.decode("utf-8", errors="strict")) for request in rig.server.requests
    ]


@pytest.mark.parametrize("stream", [False, True])
async def test_lone_surrogates_in_user_text_and_reply_are_stored_repaired(
    rig: Rig, stream: bool
) -> None:
    rig.agent(stream=stream)
    rig.server.script(reply_text(f"hi {LONE} there", chunks=["hi ", f"{LONE} ", "there"]))

    result = await rig.turn(entered(f"a{LONE}b"))

    assert result.status == "completed"
    assert [(m.role, m.content) for m in await rig.stored()] == [
        ("user", f"a{FFFD}b"),
        ("assistant", f"hi {FFFD} there"),
    ]
    [body] = sent_bodies(rig)
    assert without_clock_note(body["messages"])[-1]["content"] == f"a{FFFD}b"


async def test_surrogates_in_tool_arguments_do_not_crash_the_turn(rig: Rig) -> None:
    rig.server.script(reply_tool_call("echo", {"text": f"x{LONE}y"}), reply_text("done"))

    result = await rig.turn("go")

    assert (result.status, result.reply) == ("completed", "done")
    [call] = await rig.store.list_tool_calls(result.turn_id)
    assert call.result == f"echo:x{FFFD}y"
    assert len(sent_bodies(rig)) == 2


async def test_a_surrogate_pair_split_across_stream_chunks_is_joined(rig: Rig) -> None:
    rig.agent(stream=True)
    chunks = [r'{"choices":[{"delta":{"content":"ok \ud83d"}}]}',
              r'{"choices":[{"delta":{"content":"\ude00"},"finish_reason":"stop"}]}']  # fmt: skip
    rig.server.script(reply_sse(chunks))

    result = await rig.turn("smile")

    assert result.reply == "ok 😀"
    assert (await rig.stored())[-1].content == "ok 😀"


@pytest.mark.parametrize("stream", [False, True])
async def test_emoji_rtl_zero_width_and_control_characters_round_trip(
    rig: Rig, stream: bool
) -> None:
    rig.agent(stream=stream)
    rig.server.script(reply_text(ODD_BUT_VALID, chunks=[ODD_BUT_VALID[:9], ODD_BUT_VALID[9:]]))

    result = await rig.turn(ODD_BUT_VALID)

    assert result.reply == ODD_BUT_VALID
    assert [m.content for m in await rig.stored()] == [ODD_BUT_VALID, ODD_BUT_VALID]
    assert without_clock_note(sent_bodies(rig)[0]["messages"])[-1]["content"] == ODD_BUT_VALID


async def test_every_text_the_store_writes_was_repaired_where_it_entered(
    store: SqliteStore,
) -> None:
    # was test_store_repairs_every_text_it_writes: the store no longer repairs, the edge
    # (an adapter's normalize step) does; the same values are stored and read back
    session = await store.create_session(entered(f"key{LONE}"), "profile")
    blocks = [{"type": "text", "text": entered(f"block{LONE}")}]
    message = ChatMessage("user", blocks)
    await store.append_message(session.id, None, message, origin=entered(f"o{LONE}"))

    [stored] = await store.load_active_messages(session.id)
    assert stored.message.content == [{"type": "text", "text": f"block{FFFD}"}]
    assert stored.origin == f"o{FFFD}"
    assert await store.get_active_session(entered(f"key{LONE}")) is not None


def test_valid_text_keeps_valid_text_and_repairs_only_surrogates() -> None:
    assert valid_text(ODD_BUT_VALID) is ODD_BUT_VALID
    assert valid_text(f"{LONE}\ud83d\ude00\udfff") == f"{FFFD}😀{FFFD}"


def test_session_hash_of_a_key_with_a_lone_surrogate_is_its_repaired_keys() -> None:
    assert session_hash(f"telegram:dm:{LONE}") == session_hash(f"telegram:dm:{FFFD}")


def test_repair_fields_makes_a_record_valid_and_keeps_a_valid_one() -> None:
    file = Attachment("document", f"f{LONE}.txt", "text/plain", 1, "s")
    odd = Envelope("message", "1", f"c{LONE}", "dm", "7", f"n{LONE}", text=f"t{LONE}",
                   attachments=(file,))  # fmt: skip
    assert (odd.channel_id, odd.author_name, odd.text) == (f"c{FFFD}", f"n{FFFD}", f"t{FFFD}")
    assert odd.attachments[0].name == f"f{FFFD}.txt"
    assert "\\ud800" in odd.to_json().replace("ufffd", "ud800")
    assert Envelope.from_json(odd.to_json().replace("ufffd", "ud800")) == odd
    valid = WebMessage("c", "1", ODD_BUT_VALID)
    assert valid.text is ODD_BUT_VALID
