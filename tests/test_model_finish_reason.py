"""The model client's answer says why the model stopped (``finish_reason``) and never hands
on tool-call arguments a strict server would reject (core/model/arguments.py), streamed or
not, through real httpx against the scripted model server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.model.arguments import checked_call, is_json, sendable_call
from core.model.base import ModelRequest
from core.model.openai_client import OpenAIClient
from core.types import ChatMessage, ToolCall
from tests.support.model_server import (
    ScriptedModelServer,
    reply_json,
    reply_sse,
    reply_text,
    reply_tool_call,
)

MODES = [pytest.param(False, id="whole"), pytest.param(True, id="stream")]


@pytest.fixture
async def client(model_server: ScriptedModelServer) -> AsyncIterator[OpenAIClient]:
    opened = OpenAIClient(base_url=model_server.url, model="m", timeout=5.0, trust_env=False)
    yield opened
    await opened.aclose()


def ask(stream: bool) -> ModelRequest:
    return ModelRequest(messages=[ChatMessage(role="user", content="hi")], stream=stream)


@pytest.mark.parametrize("stream", MODES)
@pytest.mark.parametrize(
    ("sent", "read"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls", "tool_calls"),
        ("content_filter", "content_filter"),
        ("function_call", "tool_calls"),
        ("something_new", None),
    ],
)
async def test_finish_reason_is_read_in_our_words(
    client: OpenAIClient, model_server: ScriptedModelServer, stream: bool, sent: str, read: Any
) -> None:
    model_server.script(reply_text("text", finish_reason=sent))

    reply = await client.complete(ask(stream))

    assert (reply.content, reply.finish_reason) == ("text", read)


async def test_a_missing_finish_reason_is_none(
    client: OpenAIClient, model_server: ScriptedModelServer
) -> None:
    choice = {"index": 0, "message": {"role": "assistant", "content": "x"}}
    model_server.script(reply_json({"choices": [choice]}))

    assert (await client.complete(ask(False))).finish_reason is None


async def test_a_stream_with_an_unknown_finish_reason_still_ends(
    client: OpenAIClient, model_server: ScriptedModelServer
) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "eog"}]}
    model_server.script(reply_sse([chunk], done=False))

    reply = await client.complete(ask(True))

    assert (reply.content, reply.finish_reason) == ("x", None)


@pytest.mark.parametrize("stream", MODES)
@pytest.mark.parametrize(
    ("raw", "arguments", "unparsed"),
    [
        ("{", "{}", "{"),
        ('{"command": "l', "{}", '{"command": "l'),
        ('{"n": NaN}', "{}", '{"n": NaN}'),
        ("", "{}", None),
        ('{"command": "ls"}', '{"command": "ls"}', None),
        ("[1]", "[1]", None),  # JSON, not an object: the runner says so
    ],
)
async def test_tool_call_arguments_come_out_as_valid_json(
    client: OpenAIClient,
    model_server: ScriptedModelServer,
    stream: bool,
    raw: str,
    arguments: str,
    unparsed: str | None,
) -> None:
    model_server.script(reply_tool_call("terminal", raw, id="c1", finish_reason="length"))

    reply = await client.complete(ask(stream))

    assert reply.finish_reason == "length"
    assert reply.tool_calls == (ToolCall("c1", "terminal", arguments, unparsed=unparsed),)
    assert reply.to_message().to_wire()["tool_calls"][0]["function"]["arguments"] == arguments


def test_json_is_what_a_strict_parser_accepts() -> None:
    assert is_json('{"a": [1, 2.5, "x", null, true]}') and is_json("[]")
    assert not any(is_json(t) for t in ["{", '{"a":', "", "NaN", "{} x", "{'a': 1}"])


def test_a_stored_call_with_broken_arguments_is_made_sendable() -> None:
    assert sendable_call(ToolCall("c", "t", "{")) == ToolCall("c", "t", "{}", unparsed="{")
    assert sendable_call(ToolCall("c", "t", "")) == ToolCall("c", "t", "{}")
    good = ToolCall("c", "t", '{"a": 1}')
    assert sendable_call(good) is good
    assert checked_call("c", "t", " ") == ToolCall("c", "t", "{}")
