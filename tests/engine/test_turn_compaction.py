"""Context management: compaction, overflow errors, oversized tool results
(``docs/turn-loop.md`` §18), against the scripted model server and a real SQLite file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from core.agent.compaction import (
    SUMMARY_CUT_NOTE,
    SUMMARY_PROMPT,
    TOO_LONG_REPLY,
    too_long_reply,
)
from core.agent.context import SUMMARY_ACK, ContextMeter, raw_estimate
from core.agent.control import TurnControl
from core.agent.failure_text import compact_failure
from core.model.errors import ModelError
from core.tools.base import ToolContext, ToolResult
from core.types import ChatMessage, ToolSpec
from tests.engine.conftest import KEY, Rig, make_tool
from tests.support.model_errors import CONTEXT_OVERFLOWS, ServerError
from tests.support.model_server import (
    ReceivedRequest,
    Reply,
    reply_error,
    reply_text,
    reply_tool_call,
)

SUMMARY = "Summary: the user sent numbered messages and got numbered answers."


def is_summary_request(request: ReceivedRequest) -> bool:
    return bool(request.messages[0]["content"] == SUMMARY_PROMPT)


def chat_requests(rig: Rig) -> list[ReceivedRequest]:
    return [r for r in rig.server.requests if not is_summary_request(r)]


def answer(request: ReceivedRequest) -> Reply:
    """A summary for a summarisation request, else an answer naming the user's message."""
    if is_summary_request(request):
        return reply_text(SUMMARY)
    last_user = [m for m in request.messages if m["role"] == "user"][-1]["content"]
    return reply_text(f"answer to {last_user.split()[0]} {last_user.split()[1]}")


def rows(tmp_path: Path) -> list[tuple[str, int, str]]:
    """Every stored message (role, active, content), straight from the SQLite file."""
    with sqlite3.connect(tmp_path / "store.db") as db:
        found = db.execute("SELECT role, active, content FROM messages ORDER BY id").fetchall()
    return [(role, active, content or "") for role, active, content in found]


async def test_a_200_turn_conversation_keeps_answering_in_a_small_window(
    rig: Rig, tmp_path: Path
) -> None:
    rig.agent(context_window=2000)
    rig.server.script(*[answer] * 300)

    for number in range(200):
        result = await rig.turn(f"message {number}: please note the number {number} for me")
        assert result.reply == f"answer to message {number}:"

    summaries = [r for r in rig.server.requests if is_summary_request(r)]
    assert summaries, "no summarisation request reached the server"
    tools = [ToolSpec(t.name, t.description, t.parameters) for t in rig.tools.specs()]
    for request in chat_requests(rig):
        sent = [ChatMessage(m["role"], m.get("content")) for m in request.messages]
        assert raw_estimate(sent, tools) <= 2000
    stored = rows(tmp_path)
    assert len([r for r in stored if r[0] == "user"]) == 200  # nothing deleted
    active_summaries = [r for r in stored if r[0] == "system" and r[1] == 1]
    assert len(active_summaries) == 1 and SUMMARY in active_summaries[0][2]
    inactive = [r for r in stored if r[1] == 0]
    assert any(r[2].startswith("message 0:") for r in inactive)
    assert len(inactive) > 300


@pytest.mark.parametrize("overflow", CONTEXT_OVERFLOWS, ids=lambda e: e.server)
async def test_an_overflow_error_compacts_once_and_the_retry_answers(
    rig: Rig, overflow: ServerError
) -> None:
    rig.agent(context_window=32768)
    rig.server.script(*[answer] * 4)
    for number in range(4):
        await rig.turn(f"message {number}: hello")
    rig.server.script(overflow.reply(), reply_text(SUMMARY), reply_text("it fits now"))

    result = await rig.turn("message 4: and now?")

    assert result.status == "completed" and result.reply == "it fits now"
    overflowed, summarising, retry = rig.server.requests[-3:]
    assert is_summary_request(summarising) and not is_summary_request(retry)
    assert sum(is_summary_request(r) for r in rig.server.requests) == 1
    assert retry.messages[1]["role"] == "user" and SUMMARY in retry.messages[1]["content"]
    assert retry.messages[2] == {"role": "assistant", "content": SUMMARY_ACK}
    assert len(retry.messages) < len(overflowed.messages)


async def test_a_second_overflow_after_compaction_says_what_can_help(rig: Rig) -> None:
    llama = CONTEXT_OVERFLOWS[0]
    rig.agent(context_window=32768)
    rig.server.script(*[answer] * 4)
    for number in range(4):
        await rig.turn(f"message {number}: hello")
    rig.server.script(llama.reply(), reply_text(SUMMARY), llama.reply())

    result = await rig.turn("message 4: and now?")

    assert result.status == "failed" and result.reply == too_long_reply(summarised=True)
    assert "summarised" in result.reply and "/new" not in result.reply  # /new cannot help
    assert rig.server.pending == 0


async def test_an_overflow_with_nothing_to_compact_tells_the_user_at_once(rig: Rig) -> None:
    rig.agent(context_window=32768)
    rig.server.script(CONTEXT_OVERFLOWS[1].reply())

    result = await rig.turn("message 0: a first message that is already too long")

    assert result.reply == TOO_LONG_REPLY and len(rig.server.requests) == 1
    assert "summarised" not in result.reply  # nothing was


async def test_an_oversized_tool_result_is_cut_with_a_note(rig: Rig) -> None:
    huge = "HEAD " + "x" * 20_000 + " TAIL"

    async def dump(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(huge)

    rig.tools.register(make_tool("dump", dump))
    rig.agent(context_window=2000)
    rig.server.script(reply_tool_call("dump", {}), reply_text("done"))

    await rig.turn("dump it")

    sent = rig.server.requests[1].messages[-1]
    assert sent["role"] == "tool" and len(sent["content"]) < 2000 * 4
    assert sent["content"].startswith("HEAD ") and sent["content"].endswith(" TAIL")
    assert "characters cut from the middle of this tool result" in sent["content"]
    assert (await rig.stored())[-2].content == huge  # the store keeps it whole


async def test_compaction_never_splits_a_tool_call_from_its_result(
    rig: Rig, tmp_path: Path
) -> None:
    rig.agent(context_window=2000)

    def tool_or_answer(request: ReceivedRequest) -> Reply:
        if is_summary_request(request):
            return reply_text(SUMMARY)
        if request.messages[-1]["role"] == "tool":
            return reply_text("echoed")
        return reply_tool_call("echo", {"text": "y" * 150}, id=f"call_{request.index}")

    rig.server.script(*[tool_or_answer] * 200)
    for number in range(30):
        assert (await rig.turn(f"message {number}: echo something")).reply == "echoed"

    assert any(is_summary_request(r) for r in rig.server.requests)
    for request in chat_requests(rig):
        called: set[str] = set()
        for message in request.messages:
            called |= {c["id"] for c in message.get("tool_calls") or ()}
            if message["role"] == "tool":
                assert message["tool_call_id"] in called
    with sqlite3.connect(tmp_path / "store.db") as db:
        found = db.execute("SELECT role, active, tool_calls, tool_call_id FROM messages").fetchall()
    call_active = {
        call["id"]: active
        for role, active, calls, _ in found
        if calls
        for call in json.loads(calls)
    }
    for role, active, _, call_id in found:
        if role == "tool":
            assert call_active[call_id] == active


async def test_a_redirect_correction_survives_compaction_word_for_word(rig: Rig) -> None:
    rig.agent(context_window=32768)
    control = TurnControl()
    control.redirect("use Celsius, not Fahrenheit")
    rig.server.script(*[answer] * 4, reply_text("A summary that forgets the correction."))
    await rig.turn("message 0: what is the weather?", control=control)
    for number in range(1, 4):
        await rig.turn(f"message {number}: and tomorrow?")

    done = await rig.agent().compact(KEY)

    assert done is not None
    [summary] = [m for m in await rig.stored() if m.role == "system"]
    assert "User correction during the turn: use Celsius, not Fahrenheit" in summary.text()


async def test_compact_now_summarises_the_older_turns(rig: Rig, tmp_path: Path) -> None:
    rig.agent(context_window=32768)
    rig.server.script(*[answer] * 6)
    for number in range(5):
        await rig.turn(f"message {number}: hello")

    done = await rig.agent().compact(KEY)

    assert done is not None and done.summarised == 6  # 3 turns: the last 2 are kept
    stored = await rig.stored()
    # stored after the rows it leaves active; sent first
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant", "system"]
    assert stored[0].content == "message 3: hello"
    assert sum(1 for r in rows(tmp_path) if r[1] == 0) == 6
    rig.server.script(reply_text("still here"))
    assert (await rig.turn("message 5: there?")).reply == "still here"
    sent = rig.server.requests[-1].messages
    assert SUMMARY in sent[1]["content"] and sent[3]["content"] == "message 3: hello"


async def test_a_summary_cut_off_by_its_length_limit_is_stored_with_a_note(rig: Rig) -> None:
    rig.agent(context_window=32768)
    rig.server.script(*[answer] * 5, reply_text("The user sent", finish_reason="length"))
    for number in range(5):
        await rig.turn(f"message {number}: hello")

    assert await rig.agent().compact(KEY) is not None

    [summary] = [m for m in await rig.stored() if m.role == "system"]
    assert summary.text().endswith("The user sent\n\n" + SUMMARY_CUT_NOTE)


async def test_a_summary_call_that_overflows_quotes_half_as_much_until_it_fits(
    rig: Rig,
) -> None:
    llama = CONTEXT_OVERFLOWS[0]
    rig.agent(context_window=32768)
    rig.server.script(*[answer] * 5)
    for number in range(5):
        await rig.turn(f"message {number}: " + "word " * 3000)
    rig.server.script(llama.reply(), llama.reply(), reply_text(SUMMARY))

    assert await rig.agent().compact(KEY) is not None

    quoted = [len(r.messages[1]["content"]) for r in rig.server.requests[-3:]]
    assert all(is_summary_request(r) for r in rig.server.requests[-3:])
    assert quoted[1] <= quoted[0] // 2 + 300 and quoted[2] <= quoted[1] // 2 + 300


async def test_compact_says_the_server_refused_not_that_it_did_not_answer(rig: Rig) -> None:
    rig.agent(context_window=32768)
    rig.server.script(*[answer] * 5, reply_error(400, "Invalid value for 'max_tokens'"))
    for number in range(5):
        await rig.turn(f"message {number}: hello")

    with pytest.raises(ModelError) as failed:
        await rig.agent().compact(KEY)

    said = compact_failure(failed.value)
    assert "refused the request" in said and "did not answer" not in said
    assert "Invalid value for 'max_tokens'" in said


def test_the_reported_usage_corrects_the_estimate() -> None:
    meter = ContextMeter()
    messages = [ChatMessage("user", "x" * 400)]
    raw = raw_estimate(messages)

    assert meter.estimate("s1", messages) == raw  # nothing learnt: bytes / 4
    meter.observe("s1", raw, reported=raw * 2)
    meter.observe("s2", raw, reported=raw)

    assert meter.estimate("s1", messages) == raw * 2
    assert meter.estimate("s2", messages) == raw  # per session
    assert meter.estimate("s3", messages) == raw  # a new session: the model's latest ratio
