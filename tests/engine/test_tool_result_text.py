"""A tool's result is an edge (core/text.py): a lone surrogate in what a tool returns — a
command's output, a file name from the sandbox, an exception's message — is repaired in
the tool runner, where it enters the turn (core/agent/tool_runner.py), so the call is
stored, hooks see valid text and the next request body is valid UTF-8 JSON."""

from __future__ import annotations

import json
from typing import Any

from core.agent.tool_runner import entered
from core.tools.base import ToolContext, ToolResult
from tests.engine.conftest import Rig, make_tool
from tests.support.model_replies import without_clock_note
from tests.support.model_server import reply_text, reply_tool_call

LONE, FFFD = "\ud800", "\ufffd"


async def listing(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """A workspace listing holding a name the OS could not decode (``surrogateescape``)."""
    return ToolResult(f"report{LONE}.txt")


async def failing(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    raise FileNotFoundError(f"no such file: data{LONE}.csv")


def tool_messages(rig: Rig) -> list[str]:
    """The tool results the model server received, decoded strictly (valid UTF-8 JSON)."""
    body = json.loads(rig.server.requests[-1].raw.decode("utf-8", errors="strict"))
    return [m["content"] for m in without_clock_note(body["messages"]) if m["role"] == "tool"]


async def test_a_tool_result_with_a_lone_surrogate_is_repaired_where_it_enters(rig: Rig) -> None:
    rig.tools.register(make_tool("listing", listing))
    seen: list[str] = []
    rig.hooks.register("post_tool_call", lambda **kwargs: seen.append(kwargs["result"]))
    rig.server.script(reply_tool_call("listing", {}), reply_text("done"))

    result = await rig.turn("list")

    assert (result.status, result.reply) == ("completed", "done")
    [call] = await rig.store.list_tool_calls(result.turn_id)
    assert call.result == seen[0] == f"report{FFFD}.txt"
    assert tool_messages(rig) == [f"report{FFFD}.txt"]


async def test_a_tool_failure_naming_an_odd_file_is_repaired_where_it_enters(rig: Rig) -> None:
    rig.tools.register(make_tool("failing", failing))
    rig.server.script(reply_tool_call("failing", {}), reply_text("sorry"))

    result = await rig.turn("read it")

    assert result.status == "completed"
    [call] = await rig.store.list_tool_calls(result.turn_id)
    assert call.is_error and call.result.endswith(f"no such file: data{FFFD}.csv")
    assert tool_messages(rig) == [call.result]


def test_valid_result_text_enters_as_it_is() -> None:
    text = "ok 👍 مرحبا"
    assert entered(text) is text
