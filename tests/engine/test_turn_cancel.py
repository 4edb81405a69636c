"""Stopping a turn (seed 000 "Stopping a turn", seed 001 §3.5): model call, tool, approval."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from core.agent.control import TurnControl
from core.agent.turn import TurnResult
from core.cancellation import abandoned_count
from core.hooks.results import AskUser
from core.tools.base import ToolContext, ToolResult
from tests.engine.conftest import KEY, Rig, make_tool
from tests.support.model_server import reply_hang, reply_text, reply_tool_call

STOP_WITHIN = 1.0
"""A stop ends the turn well within this; its latency is measured by bench/stop.py."""


async def stop_and_time(control: TurnControl, turn: asyncio.Task[TurnResult]) -> TurnResult:
    """Stop the turn; assert it ended within :data:`STOP_WITHIN`."""
    began = time.monotonic()
    control.stop()
    result = await asyncio.wait_for(turn, 2)
    assert time.monotonic() - began < STOP_WITHIN
    return result


async def test_stop_aborts_an_in_flight_model_call_and_saves_nothing_partial(rig: Rig) -> None:
    rig.server.script(reply_hang(reply_text("never seen")))
    control = TurnControl()
    turn = asyncio.create_task(rig.turn("hi", control=control))
    [request] = await rig.server.wait_for_requests(1)

    result = await stop_and_time(control, turn)

    assert (result.status, result.exit_reason, result.reply) == ("interrupted", "cancelled", None)
    await asyncio.wait_for(request.closed.wait(), 2)  # the HTTP request was really dropped
    assert [m.content for m in await rig.stored()] == ["hi"]
    assert rig.log.of("agent_loop_stopped")[0]["reason"] == "cancelled"
    stored = await rig.store.get_turn(result.turn_id)
    assert stored is not None and (stored.status, stored.exit_reason) == (
        "interrupted",
        "cancelled",
    )


async def test_stop_aborts_a_running_tool(rig: Rig) -> None:
    started = asyncio.Event()

    async def forever(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        started.set()
        await asyncio.Event().wait()
        return ToolResult("unreachable")

    rig.tools.register(make_tool("forever", forever))
    rig.server.script(reply_tool_call("forever", {}))
    control = TurnControl()
    turn = asyncio.create_task(rig.turn("go", control=control))
    await asyncio.wait_for(started.wait(), 5)

    result = await stop_and_time(control, turn)

    assert (result.status, result.exit_reason) == ("interrupted", "cancelled")
    stored = await rig.stored()
    assert [m.role for m in stored] == ["user", "assistant", "tool"]
    assert stored[-1].content == "Cancelled: the turn was stopped before this tool finished."
    assert len(rig.server.requests) == 1


async def test_stop_ends_a_pending_approval_at_once(rig: Rig) -> None:
    rig.hooks.register("pre_tool_call", lambda **kw: AskUser("Run echo?"))
    rig.server.script(reply_tool_call("echo", {"text": "x"}))
    control = TurnControl()
    turn = asyncio.create_task(rig.turn("go", control=control))
    request = await rig.presenter.next_request()

    result = await stop_and_time(control, turn)

    assert (result.status, result.exit_reason) == ("interrupted", "cancelled")
    approval = await rig.store.get_approval(request.id)
    assert approval is not None and approval.state == "cancelled"
    record = (await rig.store.list_tool_calls(result.turn_id))[0]
    assert record.approval_outcome == "cancelled"


async def test_interrupt_reason_ends_the_turn_as_interrupted_by_user(rig: Rig) -> None:
    rig.server.script(reply_hang(reply_text("never")))
    control = TurnControl()
    turn = asyncio.create_task(rig.turn("hi", control=control))
    await rig.server.wait_for_requests(1)

    control.stop("interrupted_by_user")
    result = await asyncio.wait_for(turn, 2)

    assert (result.status, result.exit_reason) == ("interrupted", "interrupted_by_user")
    assert rig.log.of("agent_loop_stopped")[0]["reason"] == "interrupted_by_user"


async def test_interrupt_is_checked_at_the_top_of_each_iteration(rig: Rig) -> None:
    control = TurnControl()

    async def stop_from_inside(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        control.stop("interrupted_by_user")  # noticed at the top of the next iteration
        return ToolResult("done anyway")

    rig.tools.register(make_tool("stopper", stop_from_inside))
    rig.server.script(reply_tool_call("stopper", {}), reply_text("not reached"))

    result = await rig.turn("go", control=control)

    assert result.exit_reason == "interrupted_by_user"
    assert len(rig.server.requests) == 1


async def test_a_turn_whose_token_is_already_cancelled_makes_no_model_call(rig: Rig) -> None:
    control = TurnControl()
    control.stop()

    result = await rig.turn("hi", control=control)

    assert (result.status, result.exit_reason, result.iterations) == ("interrupted", "cancelled", 0)
    assert rig.server.requests == []
    assert rig.log.names()[-2:] == ["agent_loop_stopped", "on_session_end"]


async def test_stopping_the_parent_stops_its_child_agent(rig: Rig) -> None:
    async def delegate(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        assert ctx.run_child is not None
        return ToolResult(await ctx.run_child(str(args["task"]), ctx.token))

    rig.tools.register(make_tool("delegate", delegate))
    rig.server.script(
        reply_tool_call("delegate", {"task": "dig"}, id="d1"), reply_hang(reply_text("never"))
    )
    control = TurnControl()
    turn = asyncio.create_task(rig.turn("go", control=control))
    await rig.server.wait_for_requests(2)

    result = await stop_and_time(control, turn)

    assert result.status == "interrupted"
    child = await rig.store.get_active_session(f"{KEY}/child:{result.turn_id}:d1")
    assert child is not None
    [child_turn] = await rig.store.list_turns(child.id)
    assert (child_turn.status, child_turn.exit_reason) == ("interrupted", "cancelled")


async def test_cancelling_the_turn_task_records_the_turn_and_propagates(rig: Rig) -> None:
    rig.server.script(reply_hang(reply_text("never")))
    turn = asyncio.create_task(rig.turn("hi"))
    await rig.server.wait_for_requests(1)

    turn.cancel()
    try:
        await turn
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("cancellation was swallowed")

    session = await rig.store.get_active_session(KEY)
    assert session is not None
    [stored] = await rig.store.list_turns(session.id)
    assert (stored.status, stored.exit_reason) == ("interrupted", "cancelled")
    assert rig.log.names()[-1] == "on_session_end"
    assert len(rig.agent().locks) == 0


async def test_a_tool_that_ignores_cancellation_does_not_hold_the_turn(rig: Rig) -> None:
    started, release, finished = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def stubborn(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        started.set()
        try:
            while not release.is_set():
                try:
                    await release.wait()
                except asyncio.CancelledError:
                    continue  # the misbehaviour under test: cancellation swallowed
            return ToolResult("late")
        finally:
            finished.set()

    rig.tools.register(make_tool("stubborn", stubborn))
    rig.server.script(reply_tool_call("stubborn", {}))
    control = TurnControl()
    turn = asyncio.create_task(rig.turn("go", control=control))
    await asyncio.wait_for(started.wait(), 5)
    abandoned_before = abandoned_count()
    try:
        result = await stop_and_time(control, turn)

        assert result.status == "interrupted"
        assert abandoned_count() == abandoned_before + 1  # tracked, not forgotten
    finally:
        release.set()  # let the stubborn handler end, pass or fail
        await asyncio.wait_for(finished.wait(), 5)


async def test_stop_aborts_a_hanging_pre_tool_call_hook(rig: Rig) -> None:
    entered = asyncio.Event()

    async def hang(**kwargs: Any) -> None:
        entered.set()
        await asyncio.Event().wait()

    rig.hooks.register("pre_tool_call", hang)
    rig.server.script(reply_tool_call("echo", {"text": "x"}))
    control = TurnControl()
    turn = asyncio.create_task(rig.turn("go", control=control))
    await asyncio.wait_for(entered.wait(), 5)

    result = await stop_and_time(control, turn)

    assert (result.status, result.exit_reason) == ("interrupted", "cancelled")
    stored = await rig.store.get_turn(result.turn_id)
    assert stored is not None and stored.status == "interrupted"
