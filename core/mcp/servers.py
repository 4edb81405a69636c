"""Every configured MCP server of the process: started once, shared, stopped cleanly.

:meth:`McpServers.start` starts them all at once and returns when each is ready or has
failed its first start (a server that fails keeps being retried, its tools answering
"unavailable"; it never stops the gateway). Two tools that would share a registry name
(with each other or a built-in tool) refuse the start with one line each
(:class:`McpStartError`). Each profile gets a :class:`~core.mcp.tools.McpTools` of the
servers it names; the approval policy is one hook over all of them.

A ``scope = "session"`` server is a :class:`~core.mcp.sessions.SessionServers` (in
:attr:`McpServers.sessions`): started here only to list its tools, then once per session
on the session's first call; :meth:`McpServers.end_session` stops a session's instances
(the chat's ``/new``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.hooks.builtin import BUILTIN_PRIORITY
from core.hooks.registry import HookRegistry
from core.mcp.connection import DEFAULT_BACKOFF, Backoff, ServerConnection, Sleep, State
from core.mcp.sessions import SessionServers
from core.mcp.spec import ServerSpec
from core.mcp.tools import McpApproval, McpTools, Server, clashes
from core.tools.sandbox import Bubblewrap


class McpStartError(Exception):
    """The MCP servers cannot be used as configured; one line per problem."""


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """One server, for ``/healthz``, ``/metrics`` and ``commonos mcp list``."""

    name: str
    kind: str
    state: State
    reason: str
    tools: tuple[str, ...]
    restarts: int
    calls: int
    failures: int


class McpServers:
    """The process's MCP servers (see the module docstring)."""

    def __init__(
        self,
        specs: Sequence[ServerSpec],
        sandbox: Bubblewrap | str | None = None,
        *,
        backoff: Backoff = DEFAULT_BACKOFF,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.connections = {
            spec.name: ServerConnection(spec, sandbox, backoff=backoff, sleep=sleep)
            for spec in specs
            if spec.scope == "process"
        }
        """The servers shared by every session, by name."""
        self.sessions = {
            spec.name: SessionServers(spec, sandbox, backoff=backoff, sleep=sleep)
            for spec in specs
            if spec.scope == "session"
        }
        """The servers started per session, by name."""
        self._order = [spec.name for spec in specs]
        self._reserved: frozenset[str] = frozenset()

    def servers(self) -> dict[str, Server]:
        """Every configured server, in the configured order."""
        found: dict[str, Server] = {**self.connections, **self.sessions}
        return {name: found[name] for name in self._order}

    async def start(self, reserved: Iterable[str] = ()) -> None:
        """Start every server; raises :class:`McpStartError` on a name clash (after
        stopping them again). ``reserved``: the built-in tools' names."""
        self._reserved = frozenset(reserved)
        await asyncio.gather(*(c.start() for c in self.connections.values()))
        await asyncio.gather(*(s.start() for s in self.sessions.values()))
        problems = clashes(list(self.servers().values()), self._reserved)
        if problems:
            await self.stop()
            raise McpStartError("\n".join(problems))

    async def stop(self) -> None:
        await asyncio.gather(
            *(c.stop() for c in self.connections.values()),
            *(s.stop() for s in self.sessions.values()),
        )

    async def end_session(self, session_key: str) -> None:
        """The session of ``session_key`` ended (``/new``): stop its per-session servers."""
        await asyncio.gather(*(s.end(session_key) for s in self.sessions.values()))

    def tools(self, servers: Sequence[str] | None = None) -> McpTools:
        """The tools of ``servers`` (None: every server), as a registry's tool source."""
        every = self.servers()
        chosen = every if servers is None else servers
        return McpTools([every[n] for n in chosen], self._reserved)

    def register_approval(self, hooks: HookRegistry) -> McpApproval:
        """Register the approval policy (a built-in ``pre_tool_call`` hook)."""
        policy = McpApproval(self.tools())
        hooks.register("pre_tool_call", policy, priority=BUILTIN_PRIORITY, source="builtin:mcp")
        return policy

    def status(self) -> list[ServerStatus]:
        every: dict[str, ServerConnection | SessionServers] = {**self.connections, **self.sessions}
        return [_status(every[name]) for name in self._order]


def _status(server: ServerConnection | SessionServers) -> ServerStatus:
    """One server's figures; a per-session server's summed over its instances."""
    if isinstance(server, SessionServers):
        running = [i.connection for i in server.live.values()]
        restarts = sum(c.restarts for c in running)
        calls = server.ended_calls + sum(c.calls for c in running)
        failures = server.ended_failures + sum(c.failures for c in running)
    else:
        restarts, calls, failures = server.restarts, server.calls, server.failures
    return ServerStatus(
        name=server.name,
        kind=server.spec.kind,
        state=server.state,
        reason=server.reason,
        tools=tuple(t.name for t in server.tools),
        restarts=restarts,
        calls=calls,
        failures=failures,
    )
