"""Replay is exact: a replayed update whose answer is stored gets that answer again with no
model call; an unfinished one resumes on its own message, without the turns after it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from core.agent.control import TurnControl
from core.agent.turn import TurnResult, UserMessage
from core.types import ChatMessage
from tests.engine.conftest import KEY, USER, Rig
from tests.support.model_server import reply_hang, reply_text, reply_tool_call

A, B = "question A", "question B"
ORIGIN_A, ORIGIN_B = "telegram:41", "telegram:42"


async def say(rig: Rig, text: str, origin: str) -> TurnResult:
    message = UserMessage(text, sender_id=USER, origin=origin)
    return await rig.agent().run_turn(KEY, message, TurnControl())


async def cut_short(rig: Rig, text: str, origin: str, *, requests: int) -> None:
    """Start a turn and cancel its task once the model got ``requests`` requests (a
    shutdown mid-turn: the update stays unfinished and is replayed)."""
    message = UserMessage(text, sender_id=USER, origin=origin)
    turn = asyncio.create_task(rig.agent().run_turn(KEY, message, TurnControl()))
    await rig.server.wait_for_requests(requests)
    turn.cancel()
    await asyncio.wait({turn})


def contents(messages: list[dict[str, object]], role: str) -> list[object]:
    return [m["content"] for m in messages if m["role"] == role]


async def stored(rig: Rig) -> list[tuple[str, object]]:
    return [(m.role, m.content) for m in await rig.stored()]


# the answer is stored --------------------------------------------------------------------


async def test_a_replay_whose_answer_is_stored_delivers_it_again_without_a_model_call(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    rig.server.script(reply_text("Answer A."))
    first = await say(rig, A, ORIGIN_A)
    session = await rig.store.get_active_session(KEY)
    assert session is not None
    turns_before = await rig.store.list_turns(session.id)

    with caplog.at_level(logging.INFO, logger="core.agent.opening"):
        again = await say(rig, A, ORIGIN_A)

    assert len(rig.server.requests) == 1
    assert (again.status, again.exit_reason, again.reply) == (
        "completed",
        "text_response",
        "Answer A.",
    )
    assert (again.turn_id, again.session_id) == (first.turn_id, first.session_id)
    assert await rig.store.list_turns(session.id) == turns_before  # no turn was started
    assert await stored(rig) == [("user", A), ("assistant", "Answer A.")]
    assert "its answer is stored" in caplog.text


async def test_an_answer_stored_by_a_resumed_turn_is_delivered_again_without_a_model_call(
    rig: Rig,
) -> None:
    rig.server.script(reply_hang(reply_text("lost")), reply_text("Answer A."))
    await cut_short(rig, A, ORIGIN_A, requests=1)
    resumed = await say(rig, A, ORIGIN_A)  # its answer is stored under the new turn's id

    again = await say(rig, A, ORIGIN_A)

    assert len(rig.server.requests) == 2
    assert (again.reply, again.turn_id) == ("Answer A.", resumed.turn_id)


async def test_an_answer_whose_turn_a_crash_left_running_is_delivered_again(rig: Rig) -> None:
    """Killed after the answer was stored and before the turn was finished: the start-up
    recovery marks the turn failed, the answer is still the one to deliver."""
    session = await rig.store.create_session(KEY, "test")
    await rig.store.start_turn(session.id, "t-crashed")
    await rig.store.append_message(session.id, "t-crashed", ChatMessage("user", A), origin=ORIGIN_A)
    await rig.store.append_message(session.id, "t-crashed", ChatMessage("assistant", "Answer A."))
    assert await rig.store.fail_running_turns("gateway restarted") == 1

    again = await say(rig, A, ORIGIN_A)

    assert rig.server.requests == []
    assert (again.status, again.reply, again.turn_id) == ("completed", "Answer A.", "t-crashed")


async def test_a_replay_whose_turn_ended_in_a_tool_call_is_not_answered_and_resumes(
    rig: Rig,
) -> None:
    rig.server.script(
        reply_tool_call("echo", {"text": "x"}), reply_hang(reply_text("lost")), reply_text("done")
    )
    await cut_short(rig, A, ORIGIN_A, requests=2)

    resumed = await say(rig, A, ORIGIN_A)

    assert (resumed.reply, len(rig.server.requests)) == ("done", 3)


# the turn is unfinished -------------------------------------------------------------------


async def test_a_replay_with_a_later_turn_answers_its_own_message(rig: Rig) -> None:
    rig.server.script(
        reply_hang(reply_text("A, lost in the restart")),
        reply_text("Answer B."),
        reply_text("Answer A."),
    )
    await cut_short(rig, A, ORIGIN_A, requests=1)
    await say(rig, B, ORIGIN_B)

    replayed = await say(rig, A, ORIGIN_A)

    assert replayed.reply == "Answer A."
    sent = rig.server.requests[2].messages
    assert sent[-1] == {"role": "user", "content": A}
    assert contents(sent, "user") == [A]
    assert contents(sent, "assistant") == []  # not B's answer either
    assert await stored(rig) == [
        ("user", A),
        ("user", B),
        ("assistant", "Answer B."),
        ("assistant", "Answer A."),
    ]


async def test_a_replay_resumes_after_its_own_tool_step_but_without_later_turns(
    rig: Rig,
) -> None:
    rig.server.script(
        reply_tool_call("echo", {"text": "x"}),
        reply_hang(reply_text("lost")),
        reply_text("Answer B."),
        reply_text("Answer A."),
    )
    await cut_short(rig, A, ORIGIN_A, requests=2)
    await say(rig, "earlier? no: later", ORIGIN_B)

    await say(rig, A, ORIGIN_A)

    sent = rig.server.requests[3].messages
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert contents(sent, "user") == [A] and contents(sent, "tool") == ["echo:x"]
    roles = [role for role, _ in await stored(rig)]
    assert roles == ["user", "assistant", "tool", "user", "assistant", "assistant"]


async def test_a_replay_keeps_the_history_before_its_message(rig: Rig) -> None:
    rig.server.script(
        reply_text("Answer zero."),
        reply_hang(reply_text("lost")),
        reply_text("Answer B."),
        reply_text("Answer A."),
    )
    await say(rig, "question zero", "telegram:40")
    await cut_short(rig, A, ORIGIN_A, requests=2)
    await say(rig, B, ORIGIN_B)

    await say(rig, A, ORIGIN_A)

    sent = rig.server.requests[3].messages
    assert contents(sent, "user") == ["question zero", A]
    assert contents(sent, "assistant") == ["Answer zero."]
