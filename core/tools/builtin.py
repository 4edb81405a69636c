"""The built-in tools, in one list: ``terminal``, ``read_file``, ``write_file``,
``send_file``, ``clarify``, ``delegate``."""

from __future__ import annotations

from pathlib import Path

from core.tools.base import Tool
from core.tools.clarify import clarify_tool
from core.tools.delegate import delegate_tool
from core.tools.files import read_file_tool, write_file_tool
from core.tools.sandbox import Sandbox, Workspaces
from core.tools.send_file import send_file_tool
from core.tools.terminal import DEFAULT_TIMEOUT, terminal_tool


def builtin_tools(
    workspace: Path | None = None,
    *,
    workspaces: Workspaces | None = None,
    sandbox: Sandbox | None = None,
    terminal_timeout: float = DEFAULT_TIMEOUT,
    disk_quota: int | None = None,
) -> list[Tool]:
    """All built-in tools. They work in the session's workspace from ``workspaces`` when
    given, else in ``workspace``, else in ``ToolContext.workspace``; the terminal runs in
    ``sandbox`` (default: the host shell — the gateway always passes one), whose limits
    bound it; ``write_file`` refuses a write that would pass ``disk_quota`` bytes."""
    return [
        terminal_tool(
            workspace=workspace, workspaces=workspaces, sandbox=sandbox, timeout=terminal_timeout
        ),
        read_file_tool(workspace=workspace, workspaces=workspaces),
        write_file_tool(workspace=workspace, workspaces=workspaces, disk_quota=disk_quota),
        send_file_tool(workspace=workspace, workspaces=workspaces),
        clarify_tool(),
        delegate_tool(),
    ]
