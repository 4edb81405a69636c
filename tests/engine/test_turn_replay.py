"""A replayed inbound update (same ``UserMessage.origin``) reuses its stored user message."""

from __future__ import annotations

import asyncio
import logging

import pytest

from core.agent.control import TurnControl
from core.agent.turn import TurnResult, UserMessage
from tests.engine.conftest import KEY, USER, Rig
from tests.support.model_server import reply_hang, reply_text, reply_tool_call

ORIGIN = "telegram:41"
QUESTION = "what is 6 x 7?"


async def replay(rig: Rig, text: str = QUESTION, origin: str | None = ORIGIN) -> TurnResult:
    message = UserMessage(text, sender_id=USER, origin=origin)
    return await rig.agent().run_turn(KEY, message, TurnControl())


async def cut_short(rig: Rig, text: str = QUESTION, *, requests: int = 1) -> None:
    """Start a turn with ``ORIGIN`` and cancel its task mid-model-call (a shutdown)."""
    message = UserMessage(text, sender_id=USER, origin=ORIGIN)
    turn = asyncio.create_task(rig.agent().run_turn(KEY, message, TurnControl()))
    await rig.server.wait_for_requests(requests)
    turn.cancel()
    await asyncio.wait({turn})


def user_texts(messages: list[dict[str, object]]) -> list[object]:
    return [m["content"] for m in messages if m["role"] == "user"]


async def test_a_replayed_update_sends_and_stores_the_user_message_once(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    rig.server.script(reply_hang(reply_text("lost")), reply_text("42"))
    await cut_short(rig)

    with caplog.at_level(logging.INFO, logger="core.agent.opening"):
        result = await replay(rig)

    assert (result.status, result.reply) == ("completed", "42")
    assert user_texts(rig.server.requests[1].messages) == [QUESTION]
    assert [(m.role, m.content) for m in await rig.stored()] == [
        ("user", QUESTION),
        ("assistant", "42"),
    ]
    assert f"replaying update {ORIGIN}" in caplog.text


async def test_a_replay_after_a_tool_step_continues_after_the_stored_user_message(
    rig: Rig,
) -> None:
    rig.server.script(
        reply_tool_call("echo", {"text": "x"}),
        reply_hang(reply_text("lost")),
        reply_text("done"),
    )
    await cut_short(rig, requests=2)

    await replay(rig)

    sent = rig.server.requests[2].messages
    assert user_texts(sent) == [QUESTION]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert [m.role for m in await rig.stored()] == ["user", "assistant", "tool", "assistant"]


async def test_a_new_update_with_the_same_text_is_a_new_message(rig: Rig) -> None:
    rig.server.script(reply_text("one"), reply_text("two"))
    await replay(rig, origin="telegram:1")

    await replay(rig, origin="telegram:2")

    assert user_texts(rig.server.requests[1].messages) == [QUESTION, QUESTION]
    assert [m.role for m in await rig.stored()] == ["user", "assistant", "user", "assistant"]


async def test_a_redirect_during_a_replay_updates_the_stored_message(rig: Rig) -> None:
    released = asyncio.Event()
    rig.server.script(reply_hang(reply_text("lost")), reply_hang(reply_text("ok"), until=released))
    await cut_short(rig)
    control = TurnControl()
    message = UserMessage(QUESTION, sender_id=USER, origin=ORIGIN)
    turn = asyncio.create_task(rig.agent().run_turn(KEY, message, control))
    await rig.server.wait_for_requests(2)

    control.redirect("in French")
    await asyncio.wait_for(control.redirect_recorded.wait(), 5)
    released.set()
    await asyncio.wait_for(turn, 5)

    stored = await rig.stored()
    assert [m.content for m in stored if m.role == "user"] == [
        f"{QUESTION}\n\nUser correction during the turn: in French"
    ]
