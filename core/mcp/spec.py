"""What one MCP server is, as the engine sees it: how to reach it and its rules.

Values only (no SDK import): the gateway builds them from ``[mcp.servers.<name>]``
(``gateway/config/mcp.py``); a test or an embedding builds them directly.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Approval = Literal["annotations", "always", "never"]
"""When a person is asked before a tool runs: ``annotations`` (unless the tool says
``readOnlyHint``), ``always``, ``never``."""

Scope = Literal["process", "session"]
"""``process``: one server for the whole process, shared by every session; ``session``:
one per chat session, started on its first call (:mod:`core.mcp.sessions`)."""

DEFAULT_TIMEOUT = 120.0
DEFAULT_STARTUP_TIMEOUT = 30.0
DEFAULT_SESSION_IDLE = 600.0
DEFAULT_MAX_SESSIONS = 8


@dataclass(frozen=True, slots=True)
class StdioServer:
    """A server the gateway starts: ``command`` with ``args``, only ``env`` in its
    environment (besides the sandbox's own ``PATH``/``HOME``/...), working in ``directory``.
    ``sandbox``: inside bubblewrap (the terminal's sandbox); ``network``: may use it."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    directory: Path = Path("/tmp")
    sandbox: bool = True
    network: bool = False


@dataclass(frozen=True, slots=True)
class HttpServer:
    """A streamable-HTTP server at ``url``, sent ``headers`` with every request."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One ``[mcp.servers.<name>]``."""

    name: str
    transport: StdioServer | HttpServer
    timeout: float = DEFAULT_TIMEOUT
    """Seconds one tool call may take."""
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    """Seconds to start (or reach) the server and list its tools."""
    tools: tuple[str, ...] = ()
    """Globs of the server's tool names the agent gets (empty: all)."""
    approval: Approval = "annotations"
    tool_approvals: Mapping[str, Approval] = field(default_factory=dict)
    """Per tool (the server's own name), over ``approval``."""
    left_out: frozenset[str] = frozenset()
    """The server's tools the agent never gets (``enabled = false`` per tool)."""
    scope: Scope = "process"
    session_idle: float = DEFAULT_SESSION_IDLE
    """``scope = "session"``: seconds without a call after which a session's server stops."""
    max_sessions: int = DEFAULT_MAX_SESSIONS
    """``scope = "session"``: per-session servers running at once, at most."""

    @property
    def kind(self) -> str:
        return "stdio" if isinstance(self.transport, StdioServer) else "http"

    def allows(self, tool: str) -> bool:
        """Whether the agent gets the server's ``tool`` (the ``tools`` allow list)."""
        if tool in self.left_out:
            return False
        return not self.tools or any(fnmatch.fnmatchcase(tool, glob) for glob in self.tools)

    def approval_for(self, tool: str) -> Approval:
        return self.tool_approvals.get(tool, self.approval)
