"""Nothing stored that a strict server rejects (docs/turn-loop.md §5, §15, §17): a tool call
cut off inside its arguments is never run, the model gets an error result saying so, and
what is stored and sent back is valid JSON — so the next request of the session is accepted
by a server that rejects invalid arguments (the scripted server's strict mode answers as
llama.cpp does: HTTP 500 "Failed to parse tool call arguments as JSON"). A session an older
version poisoned is repaired on load."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import httpx
import pytest

from core.tools.base import ToolContext, ToolResult
from core.types import ChatMessage, ToolCall
from tests.engine.conftest import KEY, Rig, make_tool
from tests.engine.test_turn_cut_off import MODES, llama_chunk, llama_usage
from tests.support.model_server import (
    LLAMA_ARGUMENTS_ERROR,
    reply_sse,
    reply_text,
    reply_tool_call,
    reply_tool_calls,
)

CUT_RESULT_START = "Invalid arguments for terminal: not valid JSON (cut off?)"


def counting_terminal(rig: Rig) -> list[dict[str, Any]]:
    """Register a ``terminal`` tool; the list gets the arguments of every run."""
    runs: list[dict[str, Any]] = []

    async def terminal(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        runs.append(args)
        return ToolResult(f"ran {args.get('command', '')}")

    rig.tools.register(make_tool("terminal", terminal))
    return runs


def sent_calls(rig: Rig, index: int) -> list[tuple[str, str]]:
    """``(id, arguments)`` of every assistant tool call in request ``index``."""
    return [
        (call["id"], call["function"]["arguments"])
        for message in rig.server.requests[index].messages
        for call in message.get("tool_calls") or ()
    ]


def tool_results(rig: Rig, index: int) -> dict[str, str]:
    messages = rig.server.requests[index].messages
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


def llama_cut_call(arguments: str) -> list[dict[str, Any]]:
    """A streamed tool call cut by the output limit, as llama-server sent it (-n 12)."""
    opening = {"index": 0, "id": "fzzo5h2L4pifXiWaLPN3q3ftS8XN2Pkj", "type": "function"}
    opening["function"] = {"name": "terminal", "arguments": arguments}
    return [
        llama_chunk({"role": "assistant", "content": None}),
        llama_chunk({"tool_calls": [opening]}),
        llama_chunk({}, "length"),
        llama_usage(902, 12),
    ]


@pytest.mark.parametrize("stream", MODES)
async def test_a_tool_call_cut_off_in_its_arguments_is_not_run_and_the_model_is_told(
    rig: Rig, stream: bool
) -> None:
    rig.agent(stream=stream)
    runs = counting_terminal(rig)
    rig.server.strict = True
    rig.server.script(
        reply_tool_call("terminal", "{", id="c1", finish_reason="length"),
        reply_tool_call("terminal", {"command": "ls"}, id="c2"),
        reply_text("Two files."),
        reply_text("Hello!"),
    )

    result = await rig.turn("Run the command ls.")
    later = await rig.turn("Hello, how are you?")

    assert runs == [{"command": "ls"}]  # the cut call never ran, the complete one did
    told = tool_results(rig, 1)["c1"]
    assert told.startswith(CUT_RESULT_START)
    assert '"{"' in told and "call the tool again with complete arguments" in told
    assert (result.status, result.reply) == ("completed", "Two files.")
    assert (later.status, later.reply) == ("completed", "Hello!")
    assert rig.server.rejected == []
    assert sent_calls(rig, 3) == [("c1", "{}"), ("c2", '{"command": "ls"}')]
    stored = await rig.stored()
    assert stored[1].tool_calls == (ToolCall("c1", "terminal", "{}"),)
    records = await rig.store.list_tool_calls(result.turn_id)
    cut = next(r for r in records if r.call_id == "c1")
    assert (cut.arguments, cut.is_error, cut.result) == ("{}", True, told)


async def test_a_call_cut_in_llama_cpps_stream_shape_is_not_run(rig: Rig) -> None:
    rig.agent(stream=True)
    runs = counting_terminal(rig)
    rig.server.strict = True
    rig.server.script(reply_sse(llama_cut_call('{"')), reply_text("Sorry, cut off."))

    result = await rig.turn("Run the command ls.")

    assert runs == []
    call_id = "fzzo5h2L4pifXiWaLPN3q3ftS8XN2Pkj"
    assert tool_results(rig, 1)[call_id].startswith(CUT_RESULT_START)
    assert sent_calls(rig, 1) == [(call_id, "{}")]
    assert (result.reply, rig.server.rejected) == ("Sorry, cut off.", [])


async def test_with_length_a_complete_call_runs_and_the_cut_one_does_not(rig: Rig) -> None:
    runs = counting_terminal(rig)
    rig.server.strict = True
    calls = [("a", "terminal", {"command": "pwd"}), ("b", "terminal", '{"command": "wh')]
    rig.server.script(reply_tool_calls(calls, finish_reason="length"), reply_text("done"))

    await rig.turn("Run pwd and whoami.")

    assert runs == [{"command": "pwd"}]
    results = tool_results(rig, 1)
    assert results["a"] == "ran pwd" and results["b"].startswith(CUT_RESULT_START)
    assert rig.server.rejected == []


@pytest.mark.parametrize("stream", MODES)
async def test_empty_arguments_run_as_an_empty_object_and_are_sent_back_as_one(
    rig: Rig, stream: bool
) -> None:
    rig.agent(stream=stream)
    runs = counting_terminal(rig)
    rig.server.strict = True
    rig.server.script(reply_tool_call("terminal", "", id="e"), reply_text("ok"))

    await rig.turn("Run it.")

    assert runs == [{}]
    assert (sent_calls(rig, 1), rig.server.rejected) == ([("e", "{}")], [])


async def test_the_strict_server_rejects_what_the_old_code_sent(rig: Rig) -> None:
    """The strict mode itself: llama.cpp's exact HTTP 500 body for ``{`` in the history."""
    rig.server.strict = True
    broken = {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{"}}
    messages = [
        {"role": "user", "content": "Run the command ls."},
        {"role": "assistant", "content": None, "tool_calls": [broken]},
        {"role": "tool", "tool_call_id": "c1", "content": "Invalid arguments..."},
        {"role": "user", "content": "Hello"},
    ]
    async with httpx.AsyncClient(trust_env=False) as http:
        url = rig.server.url + "/chat/completions"
        response = await http.post(url, json={"model": "m", "messages": messages})
    assert response.status_code == 500
    assert response.json() == {
        "error": {
            "code": 500,
            "message": LLAMA_ARGUMENTS_ERROR + "[json.exception.parse_error.101] parse error at "
            "line 1, column 2: syntax error while parsing object key - unexpected end of input; "
            "expected string literal",
            "type": "server_error",
        }
    }
    assert len(rig.server.rejected) == 1 and rig.server.pending == 0


async def test_an_old_poisoned_session_is_repaired_on_load(rig: Rig, tmp_path: Any) -> None:
    counting_terminal(rig)
    rig.server.script(reply_text("first"))
    first = await rig.turn("hello")
    session, turn = first.session_id, first.turn_id
    old_rows = [  # what the old code wrote: the model's arguments verbatim, and the rest
        ChatMessage("user", "Run the command ls."),
        ChatMessage("assistant", None, (ToolCall("c1", "terminal", "{"),)),
        ChatMessage("tool", "Invalid arguments for terminal: not valid JSON", (), "c1", "terminal"),
        ChatMessage("assistant", "", (ToolCall("c2", "terminal", ""),)),
        ChatMessage("tool", "ran", (), "c2", "terminal"),
        ChatMessage("assistant", None),  # a grace call answered with tool calls only
        ChatMessage("tool", "a result whose call is gone", (), "ghost", "terminal"),
    ]
    for message in old_rows:
        await rig.store.append_message(session, turn, message)
    rig.server.strict = True
    rig.server.script(reply_text("I am fine."))

    result = await rig.turn("Hello, how are you?", key=KEY)

    assert (result.status, result.reply) == ("completed", "I am fine.")
    assert rig.server.rejected == []
    request = rig.server.requests[-1]
    assert sent_calls(rig, request.index) == [("c1", "{}"), ("c2", "{}")]
    kept = tool_results(rig, request.index)
    assert kept == {"c1": "Invalid arguments for terminal: not valid JSON", "c2": "ran"}
    roles = [m["role"] for m in request.messages]
    shape = ["system", "user", "assistant", "user", "assistant", "tool", "assistant", "tool"]
    # the empty reply and the orphan result left out; the unanswered turn gets its marker
    assert roles == [*shape, "assistant", "user"]
    assert _stored_arguments(tmp_path / "store.db") >= {"{", ""}  # the store kept them


def _stored_arguments(path: Any) -> set[str]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT tool_calls FROM messages WHERE tool_calls IS NOT NULL")
        return {c["function"]["arguments"] for (raw,) in rows for c in json.loads(raw)}
