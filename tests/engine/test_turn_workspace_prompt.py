"""The system prompt names the session's workspace, the directory its terminal and file
tools work in — not the profile's root when each session has its own
(docs/turn-loop.md §2 step 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.tools.base import ToolContext, ToolResult
from core.tools.files import read_file_tool, write_file_tool
from core.tools.sandbox import NoSandbox, Workspaces
from core.tools.terminal import terminal_tool
from gateway.config import load_config
from gateway.turns.containment import profile_workspaces
from tests.engine.conftest import KEY, Rig, make_tool
from tests.support.model_server import reply_text, reply_tool_call


def workspace_line(system_prompt: str) -> str:
    [line] = [x for x in system_prompt.splitlines() if x.startswith("Workspace: ")]
    return line.removeprefix("Workspace: ")


def tool_results(rig: Rig, index: int) -> list[str]:
    return [str(m["content"]) for m in rig.server.requests[index].messages if m["role"] == "tool"]


async def test_the_prompt_names_the_directory_the_session_tools_work_in(
    rig: Rig, tmp_path: Path
) -> None:
    workspaces = Workspaces(tmp_path, "session")
    seen: list[Path] = []

    async def where(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        seen.append(ctx.workspace)
        return ToolResult("noted")

    for tool in (
        terminal_tool(workspaces=workspaces, sandbox=NoSandbox()),
        write_file_tool(workspaces=workspaces),
        read_file_tool(workspaces=workspaces),
        make_tool("where", where),
    ):
        rig.tools.register(tool)
    rig.agent(workspace_scope="session")
    rig.server.script(
        reply_tool_call("terminal", {"command": "pwd"}, id="t"),
        reply_tool_call("write_file", {"path": "note.txt", "content": "hi"}, id="w"),
        reply_tool_call("where", {}, id="c"),
        reply_text("done"),
    )

    result = await rig.turn("where are you?")

    assert result.reply == "done"
    named = workspace_line(str(rig.server.requests[0].messages[0]["content"]))
    session_dir = workspaces.path_for(KEY)
    assert named == str(session_dir) != str(tmp_path)
    assert tool_results(rig, 1)[0].splitlines()[0] == named  # what pwd printed
    assert (session_dir / "note.txt").read_text() == "hi"
    assert seen == [session_dir]


async def test_with_one_workspace_per_profile_the_prompt_names_the_profile_root(
    rig: Rig, tmp_path: Path
) -> None:
    rig.server.script(reply_text("ok"))

    await rig.turn("hi")

    assert workspace_line(str(rig.server.requests[0].messages[0]["content"])) == str(tmp_path)


def test_a_configured_profile_passes_its_workspace_scope_to_the_engine(tmp_path: Path) -> None:
    config = load_config(env={"COMMONOS_HOME": str(tmp_path)})
    section = config.profile()

    profile = config.agent_profile()

    assert profile.workspace_scope == section.workspace_scope == "session"
    assert profile.session_workspace(KEY) == profile_workspaces(section).ensure(KEY)
