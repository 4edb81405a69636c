"""Child agents for the ``delegate`` tool: own session, child token, shared budget."""

from __future__ import annotations

from typing import Any

from core.tools.base import ToolContext, ToolResult
from tests.engine.conftest import KEY, Rig, make_tool
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
    child = await rig.store.get_active_session(f"{KEY}/child:d1")
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
