"""Tool calls left without a result by a restart: the record follows the call, and the
placeholder the model gets says what is known — never started, never approved, denied,
started with an unknown outcome, or ended with its recorded result."""

from __future__ import annotations

import asyncio
from typing import Any

from core.agent.control import TurnControl
from core.agent.transcript import NEVER_APPROVED, NEVER_STARTED, OUTCOME_UNKNOWN
from core.agent.turn import UserMessage
from core.hooks.results import AskUser
from core.store.base import ToolCallRecord
from core.tools.base import ToolContext, ToolResult
from core.types import ChatMessage, ToolCall
from tests.engine.conftest import KEY, USER, Rig, make_tool
from tests.support.model_server import reply_text, reply_tool_call, reply_tool_calls

CRASHED_TURN_REQUESTS = 1


class Hanging:
    """A tool handler that starts and never finishes (until its task is cancelled)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("never reached")


async def crash_when(rig: Rig, reached: asyncio.Event) -> str:
    """Run a turn until ``reached`` is set, then cancel its task (the in-process stand-in
    for the gateway dying there); returns the turn id."""
    control = TurnControl()
    message = UserMessage("do the thing", sender_id=USER, origin="telegram:7")
    turn = asyncio.create_task(rig.agent().run_turn(KEY, message, control))
    await asyncio.wait_for(reached.wait(), 5)
    turn.cancel()
    await asyncio.wait({turn})
    assert control.turn_id is not None
    return control.turn_id


async def results_seen_next_turn(rig: Rig) -> dict[str, object]:
    """The tool results the model gets on the next turn, by call id."""
    await rig.turn("what happened?")
    sent = rig.server.requests[CRASHED_TURN_REQUESTS].messages
    return {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}


async def statuses(rig: Rig, turn_id: str) -> dict[str, str]:
    return {r.call_id: r.status for r in await rig.store.list_tool_calls(turn_id)}


def ask_before(rig: Rig, tool: str) -> None:
    def policy(**kwargs: Any) -> AskUser | None:
        return AskUser("really?") if kwargs["tool_name"] == tool else None

    rig.hooks.register("pre_tool_call", policy, source="test-policy")


async def test_a_started_call_is_told_its_outcome_is_unknown(rig: Rig) -> None:
    hanging = Hanging()
    rig.tools.register(make_tool("deploy", hanging, risk="dangerous"))
    rig.server.script(reply_tool_call("deploy", {}, id="c1"), reply_text("I will check first."))

    turn_id = await crash_when(rig, hanging.started)

    assert await statuses(rig, turn_id) == {"c1": "started"}
    assert await results_seen_next_turn(rig) == {"c1": OUTCOME_UNKNOWN}
    assert "outcome is unknown" in OUTCOME_UNKNOWN
    assert "do not repeat a side-effecting call blindly" in OUTCOME_UNKNOWN


async def test_a_call_waiting_for_approval_is_told_it_was_never_approved(rig: Rig) -> None:
    rig.tools.register(make_tool("deploy", Hanging(), risk="dangerous"))
    ask_before(rig, "deploy")
    rig.server.script(reply_tool_call("deploy", {}, id="c1"), reply_text("Shall I ask again?"))

    turn_id = await crash_when(rig, rig.presenter.shown)

    assert await statuses(rig, turn_id) == {"c1": "awaiting_approval"}
    assert await results_seen_next_turn(rig) == {"c1": NEVER_APPROVED}
    assert "never approved and did not run" in NEVER_APPROVED


async def test_a_denied_call_is_told_it_was_denied_with_its_recorded_result(rig: Rig) -> None:
    """Calls run one at a time (one is interactive): the denied call has ended and is
    recorded, the next one hangs when the gateway dies — neither result reached history."""
    hanging = Hanging()
    rig.tools.register(make_tool("deploy", Hanging(), risk="dangerous"))
    rig.tools.register(make_tool("watch", hanging, interactive=True))
    ask_before(rig, "deploy")
    rig.server.script(
        reply_tool_calls([("c1", "deploy", {}), ("c2", "watch", {})]), reply_text("ok")
    )
    turn = asyncio.create_task(crash_when(rig, hanging.started))
    request = await rig.presenter.next_request()
    assert await rig.approvals.resolve(request.id, "denied", USER) == "resolved"
    turn_id = await turn

    assert await statuses(rig, turn_id) == {"c1": "denied", "c2": "started"}
    seen = await results_seen_next_turn(rig)
    assert seen["c1"] == (
        "Recorded before the gateway restarted: it was denied and did not run."
        " Its result:\nNot approved (denied)"
    )
    assert seen["c2"] == OUTCOME_UNKNOWN


async def test_a_call_that_never_started_is_told_it_did_not_run(rig: Rig) -> None:
    hanging = Hanging()
    rig.tools.register(make_tool("watch", hanging, interactive=True))
    rig.tools.register(make_tool("deploy", Hanging(), risk="dangerous"))
    rig.server.script(
        reply_tool_calls([("c1", "watch", {}), ("c2", "deploy", {})]), reply_text("ok")
    )

    turn_id = await crash_when(rig, hanging.started)

    assert await statuses(rig, turn_id) == {"c1": "started"}  # c2 has no record at all
    assert await results_seen_next_turn(rig) == {"c1": OUTCOME_UNKNOWN, "c2": NEVER_STARTED}
    assert "It did not run" in NEVER_STARTED


async def test_a_call_still_being_decided_is_told_it_did_not_run(rig: Rig) -> None:
    deciding = asyncio.Event()

    async def slow_policy(**kwargs: Any) -> None:
        deciding.set()
        await asyncio.Event().wait()

    rig.tools.register(make_tool("deploy", Hanging(), risk="dangerous"))
    rig.hooks.register("pre_tool_call", slow_policy, source="test-policy")
    rig.server.script(reply_tool_call("deploy", {}, id="c1"), reply_text("ok"))

    turn_id = await crash_when(rig, deciding)

    assert await statuses(rig, turn_id) == {"c1": "requested"}
    assert await results_seen_next_turn(rig) == {"c1": NEVER_STARTED}


async def test_a_call_that_ended_before_the_crash_gives_its_recorded_result(rig: Rig) -> None:
    """Killed between recording a call's end and storing its result message."""
    session = await rig.store.create_session(KEY, "test")
    await rig.store.start_turn(session.id, "t-old")
    await rig.store.append_message(session.id, "t-old", ChatMessage("user", "list files"))
    call = ToolCall("c1", "ls", "{}")
    await rig.store.append_message(
        session.id, "t-old", ChatMessage("assistant", None, tool_calls=(call,))
    )
    record = ToolCallRecord("c1", "t-old", session.id, "ls", "{}", "", False, 1.0, None)
    seq = await rig.store.open_tool_call(record)
    await rig.store.set_tool_call_status(seq, "started")
    ended = ToolCallRecord(
        "c1", "t-old", session.id, "ls", "{}", "a.txt b.txt", False, 1.0, 2.0, status="finished"
    )
    await rig.store.finish_tool_call(seq, ended)
    await rig.store.fail_running_turns("gateway restarted")
    rig.server.script(reply_text("Two files."))

    await rig.turn("what happened?")

    sent = rig.server.requests[0].messages
    [tool] = [m for m in sent if m["role"] == "tool"]
    assert tool["content"] == (
        "Recorded before the gateway restarted: it finished. Its result:\na.txt b.txt"
    )
    assert await rig.store.list_tool_calls("t-old") == [ended]


async def test_a_finished_call_records_each_step_it_went_through(rig: Rig) -> None:
    seen: list[str] = []

    async def peek(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        [record] = await rig.store.list_tool_calls(ctx.turn_id)
        seen.append(record.status)
        return ToolResult("looked")

    rig.tools.register(make_tool("peek", peek))
    rig.server.script(reply_tool_call("peek", {}, id="c1"), reply_text("done"))

    result = await rig.turn("peek")

    [record] = await rig.store.list_tool_calls(result.turn_id)
    assert seen == ["started"]
    assert (record.status, record.result, record.finished_at is not None) == (
        "finished",
        "looked",
        True,
    )
