"""Child agents for the ``delegate`` tool: own session, child token, shared budget."""

from __future__ import annotations

import asyncio
from typing import Any

from core.hooks.results import AskUser
from core.tools.base import ToolContext, ToolResult
from tests.engine.conftest import KEY, USER, Rig, make_tool
from tests.support.model_server import reply_error, reply_text, reply_tool_call


def delegate_tool(rig: Rig) -> None:
    async def delegate(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        assert ctx.run_child is not None
        return ToolResult(await ctx.run_child(str(args["task"]), ctx.token.child()))

    rig.tools.register(make_tool("delegate", delegate))


async def test_delegate_runs_a_child_turn_in_its_own_session(rig: Rig) -> None:
    delegate_tool(rig)
    rig.server.script(
        reply_tool_call("delegate", {"task": "count the files"}, id="d1"),
        reply_text("There are 3 files."),
        reply_text("Your project has 3 files."),
    )

    result = await rig.turn("how many files?")

    assert (result.status, result.reply) == ("completed", "Your project has 3 files.")
    child = await rig.store.get_active_session(f"{KEY}/child:{result.turn_id}:d1")
    assert child is not None
    assert [m.content for m in await rig.stored(child.key)] == [
        "count the files",
        "There are 3 files.",
    ]
    parent_tools = [m for m in await rig.stored() if m.role == "tool"]
    assert parent_tools[0].content == "There are 3 files."


async def test_a_child_that_does_not_complete_reports_how_it_ended(rig: Rig) -> None:
    delegate_tool(rig)
    rig.agent(max_iterations=5)
    rig.server.script(
        reply_tool_call("delegate", {"task": "t"}, id="d1"),
        reply_error(401),
        reply_text("the child failed"),
    )

    await rig.turn("go")

    parent_tools = [m for m in await rig.stored() if m.role == "tool"]
    assert parent_tools[0].content.startswith("[child agent failed: model_error]")


async def test_children_of_two_turns_with_the_same_call_id_get_separate_sessions(
    rig: Rig,
) -> None:
    delegate_tool(rig)
    rig.server.script(
        reply_tool_call("delegate", {"task": "task one"}, id="call_1"),
        reply_text("child one"),
        reply_text("parent one"),
        reply_tool_call("delegate", {"task": "task two"}, id="call_1"),
        reply_text("child two"),
        reply_text("parent two"),
    )

    first = await rig.turn("one")
    second = await rig.turn("two")

    keys = [f"{KEY}/child:{turn.turn_id}:call_1" for turn in (first, second)]
    assert [[m.content for m in await rig.stored(key)] for key in keys] == [
        ["task one", "child one"],
        ["task two", "child two"],
    ]


async def test_the_user_who_asked_can_approve_what_a_child_agent_wants_to_do(rig: Rig) -> None:
    delegate_tool(rig)
    rig.hooks.register(
        "pre_tool_call",
        lambda tool_name, **kw: AskUser("Run echo?") if tool_name == "echo" else None,
    )
    rig.server.script(
        reply_tool_call("delegate", {"task": "echo hi"}, id="d1"),
        reply_tool_call("echo", {"text": "hi"}),
        reply_text("child done"),
        reply_text("parent done"),
    )
    turn = asyncio.create_task(rig.turn("go"))

    request = await rig.presenter.next_request()
    assert request.requested_by == USER
    assert await rig.approvals.resolve(request.id, "approved", USER) == "resolved"

    assert (await asyncio.wait_for(turn, 5)).reply == "parent done"
