"""How every turn ends (seed 000 step 6), and a turn with the real built-in tools and policy.

A crash inside the loop is recorded like any other ending: status stored first, then
``on_session_end``, and the session lock released.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from core.hooks.builtin import register_builtin_hooks
from core.tools.base import ToolContext, ToolResult
from core.tools.delegate import delegate_tool
from core.tools.terminal import terminal_tool
from tests.engine.conftest import KEY, USER, Rig, make_tool
from tests.support.model_server import reply_text, reply_tool_call


async def unstorable(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """A result the store cannot bind: recording the tool call fails mid-turn."""
    return ToolResult({"not": "text"})  # type: ignore[arg-type]


async def test_a_crash_inside_the_loop_is_stored_as_failed_and_ends_the_session_turn(
    rig: Rig,
) -> None:
    rig.tools.register(make_tool("unstorable", unstorable))
    rig.server.script(reply_tool_call("unstorable", {}), reply_text("after the crash"))

    result = await rig.turn("go")

    assert (result.status, result.exit_reason) == ("failed", "crashed")
    stored = await rig.store.get_turn(result.turn_id)
    assert stored is not None and (stored.status, stored.exit_reason) == ("failed", "crashed")
    assert rig.log.of("on_session_end")[-1]["status"] == "failed"
    assert (await asyncio.wait_for(rig.turn("again"), 5)).status == "completed"  # lock free


async def test_the_final_status_is_stored_before_on_session_end_fires(rig: Rig) -> None:
    seen: list[tuple[str | None, str | None]] = []

    async def read_turn(turn_id: str, **kwargs: Any) -> None:
        record = await rig.store.get_turn(turn_id)
        assert record is not None
        seen.append((record.status, record.exit_reason))

    rig.hooks.register("on_session_end", read_turn)
    rig.server.script(reply_text("hi"))

    await rig.turn("hello")

    assert seen == [("completed", "text_response")]


async def test_builtin_policy_asks_before_a_child_runs_rm_rf_and_approval_lets_it_run(
    rig: Rig, tmp_path: Path
) -> None:
    junk = tmp_path / "junk"
    (junk / "inner").mkdir(parents=True)
    rig.tools.register(terminal_tool())
    rig.tools.register(delegate_tool())
    register_builtin_hooks(rig.hooks)
    rig.server.script(
        reply_tool_call("delegate", {"task": "remove junk"}, id="d1"),
        reply_tool_call("terminal", {"command": "rm -rf junk && echo removed"}),
        reply_text("junk removed"),
        reply_text("done"),
    )
    turn = asyncio.create_task(rig.turn("clean up"))

    request = await rig.presenter.next_request()
    assert (request.tool, request.requested_by) == ("terminal", USER)
    assert request.session_key.startswith(f"{KEY}/child:")  # asked by the child agent
    assert junk.exists()  # nothing ran before the approval
    assert await rig.approvals.resolve(request.id, "approved", USER) == "resolved"
    result = await asyncio.wait_for(turn, 10)

    assert (result.status, result.reply) == ("completed", "done")
    assert not junk.exists()
    child_tools = [m for m in rig.server.requests[2].messages if m["role"] == "tool"]
    assert "removed" in child_tools[-1]["content"]
