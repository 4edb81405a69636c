"""The gateway's MCP servers: from ``[mcp]`` to started :class:`core.mcp.servers.McpServers`.

Called by :class:`gateway.app.Gateway` only when ``[mcp]`` configures an enabled server (a
gateway without one never imports the SDK). The stdio servers get the terminal's bubblewrap
(probed here, without network unless a server's ``network`` says so, the data directory and
the config file hidden, the default profile's memory, file size and process limits); each
one's ``directory`` is created. A start that fails on a name
clash is a :class:`~gateway.app.StartupError`-worthy :class:`McpStartError`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from gateway.config import Config
from gateway.turns.containment import hidden_paths

if TYPE_CHECKING:
    from core.mcp.servers import McpServers
    from core.tools.sandbox import Bubblewrap

log = logging.getLogger(__name__)


def builtin_names() -> list[str]:
    """The names MCP tools must not take: the built-in tools'."""
    from core.tools.builtin import builtin_tools

    return [tool.spec.name for tool in builtin_tools()]


def configured(config: Config) -> bool:
    """Whether any MCP server is configured and enabled."""
    return bool(config.mcp.enabled())


async def start_mcp_servers(config: Config, reserved: list[str]) -> McpServers | None:
    """Start the configured servers (None: none configured). ``reserved``: the built-in
    tool names an MCP tool must not take. Raises ``McpStartError`` on a clash."""
    if not configured(config):
        return None
    from core.mcp.servers import McpServers

    specs = config.mcp.specs(config.data_dir)
    for spec in specs:
        directory = getattr(spec.transport, "directory", None)
        if directory is not None:
            await asyncio.to_thread(directory.mkdir, mode=0o700, parents=True, exist_ok=True)
    sandboxed = any(getattr(spec.transport, "sandbox", False) for spec in specs)
    servers = McpServers(specs, await mcp_sandbox(config) if sandboxed else None)
    await servers.start(reserved)
    return servers


async def mcp_sandbox(config: Config) -> Bubblewrap | str:
    """The probed bubblewrap for stdio servers, or why there is none."""
    from core.tools.sandbox import Unavailable, probe

    limits = config.profile().sandbox_limits()
    found = await probe(hidden=hidden_paths(config), limits=limits)
    return found.reason if isinstance(found, Unavailable) else found
