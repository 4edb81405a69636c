"""Seed 000 steps 1–6 for plain turns: lock, history, stored message, hooks, finish."""

from __future__ import annotations

import asyncio
from typing import Any

from core.agent.control import TurnControl
from core.agent.turn import UserMessage
from core.types import ChatMessage, ToolCall
from tests.engine.conftest import KEY, Rig
from tests.support.model_server import reply_hang, reply_text, reply_tool_call


async def test_text_reply_completes_the_turn_and_is_stored(rig: Rig) -> None:
    rig.server.script(reply_text("Hello there."))

    result = await rig.turn("hi")

    assert (result.status, result.exit_reason, result.reply) == (
        "completed",
        "text_response",
        "Hello there.",
    )
    assert [(m.role, m.content) for m in await rig.stored()] == [
        ("user", "hi"),
        ("assistant", "Hello there."),
    ]
    turn = await rig.store.get_turn(result.turn_id)
    assert turn is not None
    assert (turn.status, turn.exit_reason, turn.iterations) == ("completed", "text_response", 1)


async def test_history_is_sent_oldest_first_on_the_next_turn(rig: Rig) -> None:
    rig.server.script(reply_text("one"), reply_text("two"))

    await rig.turn("first")
    await rig.turn("second")

    second = rig.server.requests[1].messages
    assert [(m["role"], m["content"]) for m in second[1:]] == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", "second"),
    ]


async def test_user_message_is_stored_before_the_first_model_call(rig: Rig) -> None:
    rig.server.script(reply_hang(reply_text("late")))
    running = asyncio.create_task(rig.turn("remember me"))

    await rig.server.wait_for_requests(1)
    stored_while_waiting = [m.content for m in await rig.stored()]
    rig.server.release()
    await running

    assert stored_while_waiting == ["remember me"]


async def test_two_turns_of_one_session_never_overlap(rig: Rig) -> None:
    rig.server.script(reply_hang(reply_text("first done")), reply_text("second done"))
    first = asyncio.create_task(rig.turn("one"))
    await rig.server.wait_for_requests(1)
    second = asyncio.create_task(rig.turn("two"))
    await _until(lambda: rig.agent().locks.waiting(KEY) == 2)

    rig.server.release()
    results = await asyncio.gather(first, second)

    assert [r.reply for r in results] == ["first done", "second done"]
    ends = [i for i, name in enumerate(rig.log.names()) if name == "on_session_end"]
    second_start = [i for i, name in enumerate(rig.log.names()) if name == "pre_llm_call"][1]
    assert ends[0] < second_start


async def test_turns_of_different_sessions_run_at_the_same_time(rig: Rig) -> None:
    rig.server.script(reply_hang(reply_text("a")), reply_hang(reply_text("b")))
    turns = [asyncio.create_task(rig.turn("x", key=k)) for k in ("test:dm:a", "test:dm:b")]

    both_in_flight = await rig.server.wait_for_requests(2)
    rig.server.release()
    await asyncio.gather(*turns)

    assert len(both_in_flight) == 2


async def test_session_lock_is_evicted_when_the_turn_ends(rig: Rig) -> None:
    rig.server.script(reply_text("ok"))

    await rig.turn("hi")

    assert len(rig.agent().locks) == 0


async def test_on_session_start_fires_only_for_a_new_session(rig: Rig) -> None:
    rig.server.script(reply_text("one"), reply_text("two"))

    first = await rig.turn("first")
    await rig.turn("second")

    starts = rig.log.of("on_session_start")
    assert starts == [
        {"session_key": KEY, "session_id": first.session_id, "turn_id": first.turn_id}
    ]


async def test_pre_llm_call_context_reaches_the_model_but_is_never_stored(rig: Rig) -> None:
    rig.hooks.register("pre_llm_call", lambda **kw: "Memory: the user likes tea.")
    rig.server.script(reply_text("Tea it is."))

    await rig.turn("what do I like?")

    sent = rig.server.requests[0].last_user_text
    assert sent == "Memory: the user likes tea.\n\nwhat do I like?"
    assert [m.content for m in await rig.stored()] == ["what do I like?", "Tea it is."]
    assert rig.log.of("pre_llm_call")[0]["user_message"] == "what do I like?"


async def test_hooks_fire_in_the_order_of_the_seed(rig: Rig) -> None:
    rig.server.script(reply_tool_call("echo", {"text": "x"}), reply_text("done"))

    await rig.turn("go")

    assert rig.log.names() == [
        "on_session_start",
        "pre_llm_call",
        "pre_api_request",
        "post_api_request",
        "pre_tool_call",
        "post_tool_call",
        "transform_tool_result",
        "pre_api_request",
        "post_api_request",
        "transform_llm_output",
        "post_llm_call",
        "on_session_end",
    ]


async def test_hooks_receive_the_documented_arguments(rig: Rig) -> None:
    rig.server.script(reply_tool_call("echo", {"text": "x"}, id="c1"), reply_text("done"))

    result = await rig.turn("go")

    scope = {"session_key": KEY, "session_id": result.session_id, "turn_id": result.turn_id}
    pre_tool = rig.log.of("pre_tool_call")[0]
    assert pre_tool == {
        **scope,
        "tool_name": "echo",
        "arguments": {"text": "x"},
        "risk": "safe",
        "call_id": "c1",
    }
    post_tool = rig.log.of("post_tool_call")[0]
    assert (post_tool["result"], post_tool["is_error"], post_tool["blocked"]) == (
        "echo:x",
        False,
        False,
    )
    assert [k["iteration"] for k in rig.log.of("pre_api_request")] == [1, 2]
    sent = rig.log.of("pre_api_request")[0]["messages"][-1]  # the wire: with the clock note
    assert sent == {"role": "user", "content": "go\n\n[Current time: Friday 2027-01-15 08:00 UTC]"}
    assert rig.log.of("post_llm_call")[0] == {**scope, "reply": "done"}
    assert rig.log.of("on_session_end")[0] == {
        **scope,
        "status": "completed",
        "exit_reason": "text_response",
    }


async def test_transform_llm_output_replaces_the_reply_and_its_stored_copy(rig: Rig) -> None:
    rig.hooks.register("transform_llm_output", lambda value, **kw: value.upper())
    rig.server.script(reply_text("quiet"))

    result = await rig.turn("hi")

    assert result.reply == "QUIET"
    assert (await rig.stored())[-1].content == "QUIET"


async def test_a_failing_store_ends_the_turn_as_crashed_without_raising(rig: Rig) -> None:
    await rig.store.close()

    result = await rig.agent().run_turn(KEY, UserMessage("hi"), TurnControl())

    assert (result.status, result.exit_reason) == ("failed", "crashed")
    assert result.reply and "try again" in result.reply


async def _until(condition: Any) -> None:
    """Let other tasks run until ``condition()`` holds (bounded; no timed sleeps)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never became true")


async def test_a_tool_call_left_unanswered_by_a_crash_gets_a_placeholder_result(rig: Rig) -> None:
    session = await rig.store.create_session(KEY, "test")
    await rig.store.append_message(session.id, None, ChatMessage(role="user", content="before"))
    dangling = ChatMessage(role="assistant", tool_calls=(ToolCall("lost", "echo", "{}"),))
    await rig.store.append_message(session.id, None, dangling)
    rig.server.script(reply_text("recovered"))

    result = await rig.turn("again")

    assert result.status == "completed"
    sent = [(m["role"], m.get("tool_call_id")) for m in rig.server.requests[0].messages[1:]]
    assert sent == [  # the crashed turn's answer: the "no answer" marker (repair.alternating)
        ("user", None), ("assistant", None), ("tool", "lost"), ("assistant", None), ("user", None)
    ]  # fmt: skip
    assert [m.role for m in await rig.stored()] == ["user", "assistant", "user", "assistant"]
