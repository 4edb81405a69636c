"""A profile's skills are readable in its terminal's bubblewrap sandbox at
``/skills/<name>``, read-only, although the data directory they live in stays hidden (real
``bwrap``, real shell)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from core.cancellation import CancellationToken
from core.skills.catalog import load_catalog
from core.skills.tool import skill_mounts
from core.tools.base import ToolContext, ToolResult
from core.tools.sandbox import Bubblewrap, Workspaces, probe
from core.tools.terminal import terminal_tool
from tests.skills.support import pdf_skill

KEY = "telegram:dm:1"


async def run(sandbox: Bubblewrap, workspaces: Workspaces, command: str) -> ToolResult:
    tool = terminal_tool(workspaces=workspaces, sandbox=sandbox)
    context = ToolContext(KEY, "s", "t", "c", CancellationToken(), Path("/nowhere"))
    return await tool.handler({"command": command}, context)


async def test_skill_files_are_mounted_read_only_and_the_data_dir_stays_hidden(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    pdf_skill(home / "skills")
    found = await probe(hidden=(home,))
    assert isinstance(found, Bubblewrap), f"bubblewrap must run here: {found}"
    sandbox = replace(found, read_only=skill_mounts(load_catalog([home / "skills"]).skills))
    workspaces = Workspaces(tmp_path / "workspaces")
    read = await run(sandbox, workspaces, "cat /skills/pdf-forms/scripts/fill.sh")
    assert "echo filled" in read.text
    write = await run(sandbox, workspaces, "echo x > /skills/pdf-forms/new; echo rc=$?")
    assert "Read-only file system" in write.text and "rc=0" not in write.text
    hidden = await run(sandbox, workspaces, f"ls {home}/skills; echo rc=$?")
    assert "pdf-forms" not in hidden.text
