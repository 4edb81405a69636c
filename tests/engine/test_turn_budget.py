"""Budgets: iterations with the grace call (seed 001 §3.1), review input budget (§3.5),
wall-clock wrap-up reminder (§3.4)."""

from __future__ import annotations

from typing import Any

from core.agent.budget import IterationBudget, LoopGate
from core.agent.turn_run import GRACE_NOTE
from core.tools.base import ToolContext, ToolResult
from tests.engine.conftest import Rig, make_tool
from tests.support.model_server import reply_text, reply_tool_call


def tool_texts(rig: Rig, index: int) -> list[str]:
    messages = rig.server.requests[index].messages
    return [str(m["content"]) for m in messages if m["role"] == "tool"]


async def test_spent_budget_gets_one_grace_call_without_tools(rig: Rig) -> None:
    rig.agent(max_iterations=2)
    rig.server.script(
        reply_tool_call("echo", {"text": "1"}, id="a"),
        reply_tool_call("echo", {"text": "2"}, id="b"),
        reply_text("Here is what I found so far."),
    )

    result = await rig.turn("work hard")

    assert (result.status, result.exit_reason) == ("budget_exhausted", "budget_exhausted")
    assert (result.reply, result.iterations) == ("Here is what I found so far.", 3)
    grace = rig.server.requests[2]
    assert grace.body["tool_choice"] == "none"
    assert tool_texts(rig, 2)[-1] == f"echo:2\n\n{GRACE_NOTE}"
    assert "tool_choice" not in rig.server.requests[1].body
    assert rig.log.of("agent_loop_stopped")[0]["reason"] == "budget_exhausted"
    turn = await rig.store.get_turn(result.turn_id)
    assert turn is not None and (turn.status, turn.iterations) == ("budget_exhausted", 3)


async def test_the_grace_call_is_granted_only_once(rig: Rig) -> None:
    rig.agent(max_iterations=1)
    rig.server.script(
        reply_tool_call("echo", {"text": "1"}, id="a"),
        reply_tool_call("echo", {"text": "ignored"}, id="b"),  # the model misbehaves
    )

    result = await rig.turn("go")

    assert result.exit_reason == "budget_exhausted"
    assert len(rig.server.requests) == 2
    stored = await rig.stored()
    assert stored[-1].role == "assistant" and stored[-1].tool_calls == ()


async def test_no_model_call_when_the_budget_is_zero(rig: Rig) -> None:
    rig.agent(max_iterations=0)

    result = await rig.turn("hi")

    assert (result.status, result.exit_reason, result.iterations) == (
        "budget_exhausted",
        "budget_exhausted",
        0,
    )
    assert rig.server.requests == []
    assert result.reply is not None and "iteration budget" in result.reply


async def test_parent_and_child_agents_share_one_iteration_budget(rig: Rig) -> None:
    async def delegate(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        assert ctx.run_child is not None
        return ToolResult(await ctx.run_child(str(args["task"]), ctx.token))

    rig.tools.register(make_tool("delegate", delegate))
    rig.server.script(
        reply_tool_call("delegate", {"task": "look"}, id="d1"),
        reply_text("child found it"),
        reply_text("parent answer"),
    )
    budget = IterationBudget(2)

    result = await rig.turn("go", budget=budget)

    assert budget.used == 2
    assert rig.server.requests[1].last_user_text == "look"
    assert tool_texts(rig, 2)[0].startswith("child found it")
    assert (result.exit_reason, result.reply) == ("budget_exhausted", "parent answer")
    assert rig.server.requests[2].body["tool_choice"] == "none"


async def test_review_input_budget_stops_between_iterations(rig: Rig) -> None:
    rig.agent(review_input_budget=500)
    rig.server.script(reply_tool_call("echo", {"text": "x"}, usage=(800, 5)), reply_text("no"))

    result = await rig.turn("review this")

    assert (result.status, result.exit_reason) == (
        "budget_exhausted",
        "review_input_budget_exhausted",
    )
    assert len(rig.server.requests) == 1
    assert [m.role for m in await rig.stored()] == ["user", "assistant", "tool"]  # writes landed
    assert rig.log.of("agent_loop_stopped")[0]["reason"] == "review_input_budget_exhausted"


async def test_review_input_budget_under_the_line_lets_the_turn_finish(rig: Rig) -> None:
    rig.agent(review_input_budget=500)
    rig.server.script(reply_tool_call("echo", {"text": "x"}, usage=(100, 5)), reply_text("ok"))

    result = await rig.turn("review this")

    assert result.exit_reason == "text_response"


def slow_tool(rig: Rig, seconds: float) -> None:
    async def slow(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        rig.clock.advance(seconds)
        return ToolResult("worked")

    rig.tools.register(make_tool("slow", slow))


async def test_wrap_up_reminder_is_injected_once_at_80_percent_of_the_run_budget(rig: Rig) -> None:
    slow_tool(rig, 45)
    rig.agent(run_budget_seconds=100)
    rig.server.script(
        reply_tool_call("slow", {}, id="a"),  # clock at 45 s: nothing yet
        reply_tool_call("slow", {}, id="b"),  # clock at 90 s: reminder
        reply_tool_call("slow", {}, id="c"),
        reply_text("delivered"),
    )

    await rig.turn("long job")

    assert tool_texts(rig, 1) == ["worked"]
    reminder = tool_texts(rig, 2)[-1]
    assert reminder.startswith("worked\n\n[Run budget: 80% of 100s used] Start wrapping up")
    everything = " ".join(tool_texts(rig, 3))
    assert everything.count("[Run budget") == 1


async def test_wrap_up_reminder_is_dormant_without_a_run_budget(rig: Rig) -> None:
    slow_tool(rig, 10_000)
    rig.server.script(reply_tool_call("slow", {}), reply_text("done"))

    await rig.turn("long job")

    assert tool_texts(rig, 1) == ["worked"]


def test_loop_gate_admits_max_iterations_then_one_grace_call() -> None:
    gate = LoopGate(2, IterationBudget(10))

    assert [gate.next_call(), gate.next_call(), gate.next_call()] == ["normal", "normal", None]
    assert gate.grant_grace_if_closed() is True
    assert gate.next_call() == "grace"
    assert gate.grant_grace_if_closed() is False
    assert gate.next_call() is None


def test_loop_gate_stops_when_the_shared_budget_runs_out() -> None:
    shared = IterationBudget(1)
    gate = LoopGate(500, shared)

    assert gate.next_call() == "normal"
    assert gate.next_call() is None
    assert (shared.used, shared.remaining) == (1, 0)
