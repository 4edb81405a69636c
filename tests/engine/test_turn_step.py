"""The step callback (seed 001 §3.6)."""

from __future__ import annotations

from typing import Any

from core.agent.step import prev_tools
from core.types import ChatMessage, ToolCall
from tests.engine.conftest import Rig
from tests.support.model_server import reply_text, reply_tool_calls


def two_echoes_then_text(rig: Rig) -> None:
    rig.server.script(
        reply_tool_calls([("a", "echo", {"text": "1"}), ("b", "echo", {"text": "2"})]),
        reply_text("done"),
    )


async def test_step_callback_runs_every_iteration_with_the_previous_tools(rig: Rig) -> None:
    steps: list[tuple[int, list[dict[str, Any]]]] = []
    two_echoes_then_text(rig)

    await rig.turn("go", step_callback=lambda i, tools: steps.append((i, tools)))

    assert steps == [
        (1, []),
        (
            2,
            [
                {"name": "echo", "result": "echo:1", "arguments": '{"text": "1"}'},
                {"name": "echo", "result": "echo:2", "arguments": '{"text": "2"}'},
            ],
        ),
    ]


async def test_an_async_step_callback_is_awaited(rig: Rig) -> None:
    seen: list[int] = []

    async def callback(iteration: int, tools: list[dict[str, Any]]) -> None:
        seen.append(iteration)

    two_echoes_then_text(rig)

    await rig.turn("go", step_callback=callback)

    assert seen == [1, 2]


async def test_a_raising_step_callback_never_affects_the_turn(rig: Rig) -> None:
    def broken(iteration: int, tools: list[dict[str, Any]]) -> None:
        raise ConnectionError("chat is down")

    two_echoes_then_text(rig)

    result = await rig.turn("go", step_callback=broken)

    assert (result.status, result.reply) == ("completed", "done")


def test_prev_tools_reads_the_latest_assistant_tool_call_message() -> None:
    old = ChatMessage(role="assistant", tool_calls=(ToolCall("o", "old", "{}"),))
    new = ChatMessage(role="assistant", tool_calls=(ToolCall("n", "new", '{"x": 1}'),))
    messages = [
        old,
        ChatMessage(role="tool", content="old result", tool_call_id="o"),
        new,
        ChatMessage(role="tool", content="new result", tool_call_id="n"),
        ChatMessage(role="user", content="later"),
    ]

    assert prev_tools(messages) == [
        {"name": "new", "result": "new result", "arguments": '{"x": 1}'}
    ]
    assert prev_tools([ChatMessage(role="user", content="hi")]) == []
