"""No assistant message with neither text nor tool calls is stored or sent
(docs/turn-loop.md §3, §9): a strict provider rejects a request that carries one, and every
later turn of the session would fail."""

from __future__ import annotations

from typing import Any

from core.agent.turn_run import budget_text
from core.types import ChatMessage
from tests.engine.conftest import KEY, Rig
from tests.support.model_replies import ReceivedRequest
from tests.support.model_server import reply_text, reply_tool_call


def empty_assistants(request: ReceivedRequest) -> list[dict[str, Any]]:
    """The request's assistant messages with no tool calls and no text."""
    return [
        m
        for m in request.messages
        if m["role"] == "assistant" and not m.get("tool_calls") and not (m["content"] or "").strip()
    ]


async def test_a_grace_call_answered_with_tool_calls_only_gives_the_budget_reply(
    rig: Rig,
) -> None:
    rig.agent(max_iterations=1)
    rig.server.script(
        reply_tool_call("echo", {"text": "1"}, id="a"),
        reply_tool_call("echo", {"text": "again"}, id="b"),  # the grace call: tools only
        reply_text("next answer"),
    )

    result = await rig.turn("go")
    after = await rig.turn("and now?")

    assert (result.exit_reason, result.reply) == ("budget_exhausted", budget_text(2))
    stored = await rig.stored()
    grace = stored[3]
    assert (grace.role, grace.content, grace.tool_calls) == ("assistant", budget_text(2), ())
    assert after.reply == "next answer"
    next_request = rig.server.requests[2]
    assert empty_assistants(next_request) == []
    assert {"role": "assistant", "content": budget_text(2)} in next_request.messages


async def test_a_reply_with_neither_text_nor_tool_calls_is_not_stored(rig: Rig) -> None:
    rig.server.script(reply_text(""), reply_text("second"))

    await rig.turn("say nothing")
    await rig.turn("say something")

    assert [m.role for m in await rig.stored()] == ["user", "user", "assistant"]
    assert empty_assistants(rig.server.requests[1]) == []


async def test_an_empty_assistant_message_already_in_the_store_is_never_sent(rig: Rig) -> None:
    rig.server.script(reply_text("first"), reply_text("second"))
    first = await rig.turn("one")
    empty = ChatMessage(role="assistant", content=None)  # left by an older version
    await rig.store.append_message(first.session_id, first.turn_id, empty)

    result = await rig.turn("two", key=KEY)

    assert result.reply == "second"
    assert empty_assistants(rig.server.requests[1]) == []
    assert [m["role"] for m in rig.server.requests[1].messages] == [
        "system",
        "user",
        "assistant",
        "user",
    ]
