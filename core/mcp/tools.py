"""MCP servers' tools as registry tools, and the ``pre_tool_call`` policy that asks first.

:class:`McpTools` is a :class:`core.tools.base.ToolSource`: a profile's registry asks it for
the tools of the servers the profile uses, as they are *now* — a server's
``notifications/tools/list_changed`` shows in the next model call, a server that is down
keeps its tools listed (they answer "unavailable" until it is back, so the model is never
left improvising around a tool that vanished).

Each tool is ``mcp__<server>__<tool>`` (:mod:`core.mcp.names`), its JSON Schema passed
through as the parameters, its description capped (both made valid text here: a server's
listing is an edge, :mod:`core.text`); its handler calls the server with the
call's deadline and the turn's token (:meth:`ServerConnection.call`) and maps the result
(:mod:`core.mcp.results`). A tool whose name another already has (a built-in, another
server's) is left out and logged; at start such a clash refuses to start
(:func:`clashes`).

:class:`McpApproval` is the ``pre_tool_call`` hook of ``approval``: ``always`` asks,
``never`` does not, ``annotations`` asks unless the tool says ``readOnlyHint``. The card
names the server and the tool and shows the arguments redacted
(:func:`core.redaction.redact`) and cut; "Always (this session)" remembers the exact call,
as for the terminal (:mod:`core.approval_memory`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import mcp_types as types

from core.hooks.results import AskUser
from core.mcp.connection import CallFailed, ServerConnection
from core.mcp.names import description, tool_name
from core.mcp.results import tool_result
from core.mcp.spec import ServerSpec
from core.redaction import redact
from core.text import valid_json, valid_text
from core.tools.base import Tool, ToolContext, ToolResult
from core.types import ToolSpec

log = logging.getLogger(__name__)

PREVIEW_CHARS = 600
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


class Server(Protocol):
    """A configured server as the registry sees it: a :class:`ServerConnection` (one per
    process) or a :class:`core.mcp.sessions.SessionServers` (one per session)."""

    @property
    def spec(self) -> ServerSpec: ...
    @property
    def name(self) -> str: ...
    @property
    def tools(self) -> tuple[types.Tool, ...]: ...
    async def reach(self, session_key: str, session_id: str) -> ServerConnection:
        """The connection a call of this session goes to (raises ``CallFailed``)."""
        ...


@dataclass(frozen=True, slots=True)
class McpTool:
    """One server tool in the registry."""

    connection: Server
    tool: types.Tool
    registered: Tool

    @property
    def read_only(self) -> bool:
        hints = self.tool.annotations
        return bool(hints is not None and hints.read_only_hint)


class McpTools:
    """The current tools of ``connections``, by registry name (a ``ToolSource``)."""

    def __init__(self, connections: Sequence[Server], reserved: Iterable[str] = ()):
        self._connections = tuple(connections)
        self._reserved = frozenset(reserved)
        self._seen: tuple[int, ...] = ()
        self._by_name: dict[str, McpTool] = {}

    def tool(self, name: str) -> Tool | None:
        found = self.current().get(name)
        return None if found is None else found.registered

    def names(self) -> list[str]:
        return sorted(self.current())

    def find(self, name: str) -> McpTool | None:
        return self.current().get(name)

    def current(self) -> dict[str, McpTool]:
        """Rebuilt only when some server's tool list changed."""
        seen = tuple(id(c.tools) for c in self._connections)
        if seen != self._seen:
            self._by_name, self._seen = self._build(), seen
        return self._by_name

    def _build(self) -> dict[str, McpTool]:
        found: dict[str, McpTool] = {}
        for connection in self._connections:
            for tool in connection.tools:
                if not connection.spec.allows(tool.name):
                    continue
                name = tool_name(connection.name, tool.name)
                if name in found or name in self._reserved:
                    log.warning("MCP server %s: tool %s left out: the name %s is taken",
                                connection.name, tool.name, name)  # fmt: skip
                    continue
                found[name] = McpTool(connection, tool, registered_tool(connection, tool, name))
        return found


def registered_tool(connection: Server, tool: types.Tool, name: str) -> Tool:
    """The registry's tool for ``tool`` of ``connection``."""
    hints = tool.annotations
    read_only = bool(hints is not None and hints.read_only_hint)
    spec = ToolSpec(
        name=name,
        description=valid_text(description(connection.name, tool.description)),
        parameters=valid_json(tool.input_schema) if tool.input_schema else EMPTY_SCHEMA,
        risk="safe" if read_only else "dangerous",
    )

    async def handler(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            reached = await connection.reach(ctx.session_key, ctx.session_id)
            result = await reached.call(tool.name, arguments, ctx.token)
        except CallFailed as failure:
            return ToolResult(str(failure), is_error=True)
        return tool_result(result, ctx.workspace)

    return Tool(spec=spec, handler=handler)


def clashes(connections: Sequence[Server], reserved: Iterable[str]) -> list[str]:
    """One line per registry name two tools would share (built-ins in ``reserved``)."""
    owners: dict[str, str] = {name: f"the built-in tool {name}" for name in reserved}
    found: list[str] = []
    for connection in connections:
        for tool in connection.tools:
            if not connection.spec.allows(tool.name):
                continue
            name = tool_name(connection.name, tool.name)
            mine = f"tool {tool.name!r} of MCP server {connection.name}"
            if name in owners:
                found.append(f"MCP tool name {name} is taken twice: by {owners[name]} and {mine}")
            owners.setdefault(name, mine)
    return found


@dataclass(frozen=True, slots=True)
class McpApproval:
    """The ``pre_tool_call`` hook asking before MCP tools, per ``approval``."""

    tools: McpTools

    def __call__(self, *, tool_name: str, arguments: dict[str, Any], **_: Any) -> AskUser | None:
        found = self.tools.find(tool_name)
        if found is None:
            return None
        rule = found.connection.spec.approval_for(found.tool.name)
        if rule == "never" or (rule == "annotations" and found.read_only):
            return None
        return AskUser(approval_prompt(found.connection.name, found.tool.name, arguments))


def approval_prompt(server: str, tool: str, arguments: dict[str, Any]) -> str:
    """The card's text: the server, the tool, the arguments redacted and cut."""
    shown = redact(json.dumps(arguments, ensure_ascii=False, indent=1, default=str))
    if len(shown) > PREVIEW_CHARS:
        shown = shown[:PREVIEW_CHARS] + f"… [{len(shown) - PREVIEW_CHARS} more chars]"
    return f"Run the MCP tool {tool} of server {server}?\n\n{shown}"
