"""Every configured MCP server of the process: started once, shared, stopped cleanly.

:meth:`McpServers.start` starts them all at once and returns when each is ready or has
failed its first start (a server that fails keeps being retried, its tools answering
"unavailable"; it never stops the gateway). Two tools that would share a registry name
(with each other or a built-in tool) refuse the start with one line each
(:class:`McpStartError`). Each profile gets a :class:`~core.mcp.tools.McpTools` of the
servers it names; the approval policy is one hook over all of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.hooks.builtin import BUILTIN_PRIORITY
from core.hooks.registry import HookRegistry
from core.mcp.connection import DEFAULT_BACKOFF, Backoff, ServerConnection, Sleep, State
from core.mcp.spec import ServerSpec
from core.mcp.tools import McpApproval, McpTools, clashes
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
        }
        self._reserved: frozenset[str] = frozenset()

    async def start(self, reserved: Iterable[str] = ()) -> None:
        """Start every server; raises :class:`McpStartError` on a name clash (after
        stopping them again). ``reserved``: the built-in tools' names."""
        self._reserved = frozenset(reserved)
        await asyncio.gather(*(c.start() for c in self.connections.values()))
        problems = clashes(list(self.connections.values()), self._reserved)
        if problems:
            await self.stop()
            raise McpStartError("\n".join(problems))

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.connections.values()))

    def tools(self, servers: Sequence[str] | None = None) -> McpTools:
        """The tools of ``servers`` (None: every server), as a registry's tool source."""
        chosen = self.connections if servers is None else servers
        return McpTools([self.connections[n] for n in chosen], self._reserved)

    def register_approval(self, hooks: HookRegistry) -> McpApproval:
        """Register the approval policy (a built-in ``pre_tool_call`` hook)."""
        policy = McpApproval(self.tools())
        hooks.register("pre_tool_call", policy, priority=BUILTIN_PRIORITY, source="builtin:mcp")
        return policy

    def status(self) -> list[ServerStatus]:
        return [
            ServerStatus(
                name=c.name,
                kind=c.spec.kind,
                state=c.state,
                reason=c.reason,
                tools=tuple(t.name for t in c.tools),
                restarts=c.restarts,
                calls=c.calls,
                failures=c.failures,
            )
            for c in self.connections.values()
        ]
