"""``read_file`` and ``write_file``: file access confined to the workspace.

The workspace is the session's (from :class:`~core.tools.sandbox.Workspaces`, the same
one the terminal uses) when the tool is given ``workspaces``; else the fixed ``workspace``;
else ``ToolContext.workspace``. A path is taken relative to the workspace and resolved
(``..`` collapsed, symlinks followed); if the result is not inside the resolved workspace
the call is an error result (``path escapes the workspace``) and nothing is read or
written. Absolute paths are allowed only when they point inside the workspace. Reads
return at most ``max_read`` bytes (with a ``[truncated N bytes]`` note); writes larger than
``max_write`` bytes are refused whole.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from core.tools.base import Tool, ToolContext, ToolResult
from core.tools.sandbox import Workspaces
from core.types import ToolSpec

DEFAULT_MAX_READ = 64_000
DEFAULT_MAX_WRITE = 1_000_000

_PATH = {"type": "string", "description": "Path relative to the workspace."}


class BadPath(ValueError):
    """The path cannot be used (NUL byte, symlink loop, ...)."""


class PathEscape(BadPath):
    """The path resolves outside the workspace."""


def confine(workspace: Path, path: str) -> Path:
    """Resolve ``path`` inside ``workspace``; raise :class:`PathEscape` when it leaves it."""
    try:
        root = workspace.resolve()
        target = (root / path).resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # RuntimeError: a symlink loop
        raise BadPath(f"path {path!r} cannot be resolved: {exc}") from exc
    if target != root and not target.is_relative_to(root):
        raise PathEscape(f"path {path!r} escapes the workspace")
    return target


async def workspace_of(
    ctx: ToolContext, workspace: Path | None, workspaces: Workspaces | None
) -> Path:
    """The directory a call of ``ctx`` works in (see the module docstring)."""
    if workspaces is not None:
        return await asyncio.to_thread(workspaces.ensure, ctx.session_key)
    return workspace or ctx.workspace


def read_file_tool(
    *,
    workspace: Path | None = None,
    workspaces: Workspaces | None = None,
    max_read: int = DEFAULT_MAX_READ,
) -> Tool:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = args.get("path")
        if not isinstance(path, str) or not path:
            return ToolResult("read_file needs a 'path' string", is_error=True)
        try:
            target = confine(await workspace_of(ctx, workspace, workspaces), path)
            return await asyncio.to_thread(_read, target, path, max_read)
        except (BadPath, OSError) as exc:
            return ToolResult(_describe(exc), is_error=True)

    spec = ToolSpec(
        name="read_file",
        description="Read a text file from the workspace.",
        parameters={"type": "object", "properties": {"path": _PATH}, "required": ["path"]},
        risk="safe",
    )
    return Tool(spec=spec, handler=handler)


def _read(target: Path, shown: str, max_read: int) -> ToolResult:
    if not target.is_file():
        return ToolResult(f"{shown} is not a file", is_error=True)
    size = target.stat().st_size
    with target.open("rb") as handle:
        data = handle.read(max_read)
    text = data.decode("utf-8", errors="replace")
    if size > len(data):
        text += f"\n[truncated {size - len(data)} bytes]"
    return ToolResult(text)


def write_file_tool(
    *,
    workspace: Path | None = None,
    workspaces: Workspaces | None = None,
    max_write: int = DEFAULT_MAX_WRITE,
) -> Tool:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path, content = args.get("path"), args.get("content")
        if not isinstance(path, str) or not path or not isinstance(content, str):
            return ToolResult("write_file needs 'path' and 'content' strings", is_error=True)
        data = content.encode("utf-8")
        if len(data) > max_write:
            limit = f"content is {len(data)} bytes; the limit is {max_write}"
            return ToolResult(limit, is_error=True)
        try:
            target = confine(await workspace_of(ctx, workspace, workspaces), path)
            await asyncio.to_thread(_write, target, data, bool(args.get("append")))
        except (BadPath, OSError) as exc:
            return ToolResult(_describe(exc), is_error=True)
        return ToolResult(f"wrote {len(data)} bytes to {path}")

    spec = ToolSpec(
        name="write_file",
        description="Write (or append) text to a file in the workspace; creates directories.",
        parameters={
            "type": "object",
            "properties": {
                "path": _PATH,
                "content": {"type": "string"},
                "append": {"type": "boolean", "description": "Append instead of replacing."},
            },
            "required": ["path", "content"],
        },
        risk="moderate",
    )
    return Tool(spec=spec, handler=handler)


def _write(target: Path, data: bytes, append: bool) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    # O_NOFOLLOW: a symlink swapped in after the check is refused, not followed.
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(target, flags, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _describe(exc: Exception) -> str:
    if isinstance(exc, BadPath):
        return str(exc)
    if isinstance(exc, OSError):
        return f"{exc.strerror or type(exc).__name__}: {exc.filename or ''}".rstrip(": ")
    return str(exc)
