"""The offline demo provider and the provider factory."""

from __future__ import annotations

import json

import pytest

from core.model.base import ModelRequest
from core.model.demo import DEMO_LABEL, DemoModel
from core.model.factory import UnknownProvider, build_model_client
from core.model.openai_client import OpenAIClient
from core.types import ChatMessage, ToolCall, ToolSpec

TERMINAL = ToolSpec("terminal", "Run a shell command", {"type": "object"}, risk="dangerous")
CLARIFY = ToolSpec("clarify", "Ask the user", {"type": "object"}, interactive=True)
TOOLS = (TERMINAL, CLARIFY)


def said(text: str) -> list[ChatMessage]:
    return [ChatMessage("system", "You are helpful."), ChatMessage("user", text)]


async def answer(messages: list[ChatMessage], tools: tuple[ToolSpec, ...] = TOOLS) -> ToolCall:
    reply = await DemoModel().complete(ModelRequest(messages, tools))
    assert reply.content is None and reply.finish_reason == "tool_calls"
    (call,) = reply.tool_calls
    return call


async def test_run_command_becomes_a_terminal_tool_call() -> None:
    call = await answer(said("run: ls -la /tmp"))

    assert call.name == "terminal"
    assert json.loads(call.arguments) == {"command": "ls -la /tmp"}


async def test_ask_becomes_a_clarify_tool_call_with_choices() -> None:
    call = await answer(said("ask: Which colour do you like? red | green|blue"))

    assert call.name == "clarify"
    assert json.loads(call.arguments) == {
        "question": "Which colour do you like?",
        "choices": ["red", "green", "blue"],
    }


async def test_run_without_the_terminal_tool_says_it_is_not_enabled() -> None:
    reply = await DemoModel().complete(ModelRequest(said("run: ls"), (CLARIFY,)))

    assert reply.tool_calls == ()
    assert reply.content is not None and "`terminal` tool" in reply.content
    assert "not enabled" in reply.content


async def test_tool_results_are_summarised_after_the_call() -> None:
    call = await answer(said("run: ls"))
    history = [
        *said("run: ls"),
        ChatMessage("assistant", None, tool_calls=(call,)),
        ChatMessage("tool", "README.md\nsetup.py", tool_call_id=call.id),
    ]

    reply = await DemoModel().complete(ModelRequest(history, TOOLS))

    assert reply.tool_calls == ()
    assert reply.content == (
        f"{DEMO_LABEL} Here is what the tools returned:\n- `terminal`: README.md setup.py"
    )


async def test_plain_message_gets_a_deterministic_reply_naming_the_demo() -> None:
    first = await DemoModel().complete(ModelRequest(said("hello"), TOOLS))
    second = await DemoModel().complete(ModelRequest(said("hello"), TOOLS))

    assert first == second
    assert first.content is not None
    assert first.content.startswith(DEMO_LABEL) and "offline demo provider" in first.content
    assert "hello" in first.content and "run: ls" in first.content


async def test_streaming_sends_deltas_that_join_into_the_reply() -> None:
    deltas: list[str] = []

    async def on_delta(fragment: str) -> None:
        deltas.append(fragment)

    request = ModelRequest(said("hello"), TOOLS, stream=True, on_delta=on_delta)
    reply = await DemoModel().complete(request)

    assert len(deltas) > 5
    assert "".join(deltas) == reply.content


def test_factory_builds_the_demo_without_url_or_key() -> None:
    client = build_model_client("demo")

    assert isinstance(client, DemoModel)
    assert client.model == "demo"


async def test_factory_builds_an_openai_client_for_the_endpoint() -> None:
    client = build_model_client(
        "openai", base_url="http://127.0.0.1:9/v1/", api_key="k", model="gpt-x"
    )

    assert isinstance(client, OpenAIClient)
    assert (client.model, client.url) == ("gpt-x", "http://127.0.0.1:9/v1/chat/completions")
    await client.aclose()


def test_factory_rejects_an_unknown_provider_naming_the_known_ones() -> None:
    with pytest.raises(UnknownProvider, match=r"unknown model provider 'antropic'.*demo, openai"):
        build_model_client("antropic")


def test_factory_requires_base_url_and_model_for_openai() -> None:
    with pytest.raises(ValueError, match="needs base_url"):
        build_model_client("openai", model="gpt-x")
    with pytest.raises(ValueError, match="needs model"):
        build_model_client("openai", base_url="http://127.0.0.1:9/v1")
