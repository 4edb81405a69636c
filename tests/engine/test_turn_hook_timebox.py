"""Every hook and the step callback run under the turn's token and a time box: /stop ends
the turn within a second whatever a hook does, and the session is free for the next one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from core.agent.control import TurnControl
from core.agent.loop import CommonAgent
from core.agent.turn import TurnResult, UserMessage
from core.model.retry import RetryPolicy
from core.store.base import StoreError, TurnRecord
from core.store.sqlite import SqliteStore
from core.types import TurnStatus
from tests.engine.conftest import KEY, USER, Rig
from tests.support.model_server import Reply, reply_error, reply_text, reply_tool_call

STOP_WITHIN = 1.0


@dataclass
class HangOnce:
    """A hook (or async step callback) that hangs on its first call, then returns."""

    entered: asyncio.Event = field(default_factory=asyncio.Event)
    calls: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append({"args": args, **kwargs})
        if len(self.calls) == 1:
            self.entered.set()
            await asyncio.Event().wait()


@dataclass(frozen=True)
class Case:
    hook: str
    script: Callable[[], list[Reply]]
    status: TurnStatus
    """How the stopped turn ends (after-turn hooks hang once the status is settled)."""


def text() -> list[Reply]:
    return [reply_text("hello")]


def tool_then_text() -> list[Reply]:
    return [reply_tool_call("echo", {"text": "x"}), reply_text("done")]


def model_error() -> list[Reply]:
    return [reply_error(400, "bad request")]


CASES = [
    Case("on_session_start", text, "interrupted"),
    Case("pre_llm_call", text, "interrupted"),
    Case("pre_api_request", text, "interrupted"),
    Case("post_api_request", text, "interrupted"),
    Case("transform_llm_output", text, "interrupted"),
    Case("post_llm_call", text, "interrupted"),
    Case("pre_tool_call", tool_then_text, "interrupted"),
    Case("post_tool_call", tool_then_text, "interrupted"),
    Case("transform_tool_result", tool_then_text, "interrupted"),
    Case("agent_loop_stopped", model_error, "failed"),
    Case("on_session_end", text, "completed"),
    Case("step_callback", text, "interrupted"),
]


async def stop_within_a_second(control: TurnControl, turn: asyncio.Task[TurnResult]) -> TurnResult:
    began = time.monotonic()
    control.stop()
    result = await asyncio.wait_for(turn, 5)
    assert time.monotonic() - began < STOP_WITHIN
    return result


@pytest.mark.parametrize("case", CASES, ids=[c.hook for c in CASES])
async def test_stop_ends_the_turn_within_a_second_whatever_a_hook_does(
    rig: Rig, case: Case
) -> None:
    hang = HangOnce()
    options: dict[str, Any] = {}
    if case.hook == "step_callback":
        options["step_callback"] = hang
    else:
        rig.hooks.register(case.hook, hang)
    rig.server.script(*case.script())
    control = TurnControl()
    turn = asyncio.create_task(rig.turn("go", control=control, **options))
    await asyncio.wait_for(hang.entered.wait(), 5)

    result = await stop_within_a_second(control, turn)

    assert result.status == case.status
    stored = await rig.store.get_turn(result.turn_id)
    assert stored is not None and stored.status == case.status
    rig.server.script(reply_text("next one"))  # after what the stop left unused
    requests = len(rig.server.requests)
    after = await asyncio.wait_for(rig.turn("again", **options), 5)
    assert after.status == "completed" and after.reply
    assert len(rig.server.requests) > requests


async def test_a_hanging_hook_without_stop_is_abandoned_after_its_time_box(rig: Rig) -> None:
    rig.hooks.time_box = 0.05
    hang = HangOnce()
    rig.hooks.register("post_llm_call", hang)
    rig.server.script(reply_text("hello"))

    result = await asyncio.wait_for(rig.turn("go"), 5)

    assert (result.status, result.reply) == ("completed", "hello")
    assert len(hang.calls) == 1


async def test_a_hanging_on_session_end_never_holds_the_session_past_its_box(rig: Rig) -> None:
    rig.hooks.time_box = 0.05
    hang = HangOnce()
    rig.hooks.register("on_session_end", hang)
    rig.server.script(reply_text("first"), reply_text("second"))

    first = asyncio.create_task(rig.turn("one"))
    second = asyncio.create_task(rig.turn("two"))
    results = await asyncio.wait_for(asyncio.gather(first, second), 5)

    assert [r.reply for r in results] == ["first", "second"]
    assert [c["status"] for c in hang.calls] == ["completed", "completed"]


async def test_a_pre_tool_call_policy_that_overruns_its_box_blocks_the_call(rig: Rig) -> None:
    rig.hooks.time_box = 0.05
    rig.hooks.register("pre_tool_call", HangOnce())
    rig.server.script(reply_tool_call("echo", {"text": "x"}), reply_text("done"))

    result = await asyncio.wait_for(rig.turn("go"), 5)

    assert result.status == "completed"
    [tool_result] = [m for m in await rig.stored() if m.role == "tool"]
    assert str(tool_result.content).startswith("Blocked: pre_tool_call policy failed")


async def test_step_callback_sees_no_previous_tools_on_the_first_call(rig: Rig) -> None:
    steps: list[tuple[int, list[dict[str, Any]]]] = []
    rig.server.script(reply_text("hello"))

    await rig.turn("go", step_callback=lambda i, tools: steps.append((i, tools)))

    assert steps == [(1, [])]


async def test_a_slow_async_step_callback_is_abandoned_and_the_turn_goes_on(rig: Rig) -> None:
    hang = HangOnce()
    rig.server.script(reply_tool_call("echo", {"text": "x"}), reply_text("done"))

    result = await asyncio.wait_for(rig.turn("go", step_callback=hang), 5)

    assert (result.status, result.reply) == ("completed", "done")
    assert [call["args"][0] for call in hang.calls] == [1, 2]
    assert len(rig.server.requests) == 2


class RecordThenFailStore:
    """The real store; ``start_turn`` writes the record, then reports a failure."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def start_turn(self, session_id: str, turn_id: str) -> TurnRecord:
        await self.inner.start_turn(session_id, turn_id)
        raise StoreError("disk I/O error after the write")


async def test_on_session_end_fires_when_a_turn_fails_to_open(rig: Rig) -> None:
    agent = CommonAgent(
        RecordThenFailStore(rig.store),
        rig.client,
        rig.tools,
        rig.hooks,
        rig.approvals,
        rig.profile,
        clock=rig.clock,
        retry=RetryPolicy(max_attempts=1),
    )

    result = await agent.run_turn(KEY, UserMessage("hi", sender_id=USER), TurnControl())

    assert (result.status, result.exit_reason) == ("failed", "crashed")
    assert result.reply and "try again" in result.reply
    [ended] = rig.log.of("on_session_end")
    assert (ended["turn_id"], ended["status"], ended["exit_reason"]) == (
        result.turn_id,
        "failed",
        "crashed",
    )
    stored = await rig.store.get_turn(result.turn_id)
    assert stored is not None and (stored.status, stored.exit_reason) == ("failed", "crashed")
    assert rig.server.requests == []


async def test_a_turn_that_never_reached_the_store_fires_no_session_end(rig: Rig) -> None:
    await rig.store.close()

    result = await rig.agent().run_turn(KEY, UserMessage("hi"), TurnControl())

    assert (result.status, result.turn_id) == ("failed", "")
    assert rig.log.of("on_session_end") == []
