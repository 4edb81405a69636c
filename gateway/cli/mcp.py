"""``commonos mcp list``: connect to every configured MCP server, print its state and tools.

Each server is started as the gateway would start it (its sandbox, its startup timeout),
listed, and stopped again. The exit code is 1 when a server did not come up, so a script
can check a deployment.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from gateway.config import Config, ConfigError, load_config
from gateway.turns.mcp import builtin_names, configured, start_mcp_servers


def command(path: Path | None) -> int:
    try:
        config = load_config(path)
    except ConfigError as exc:
        for line in exc.errors:
            print(f"commonos: {line}", file=sys.stderr)
        return 1
    if not configured(config):
        print("no MCP server is configured ([mcp.servers.<name>] in config.toml)")
        return 0
    return asyncio.run(_list(config))


async def _list(config: Config) -> int:
    from core.mcp.names import tool_name
    from core.mcp.servers import McpStartError

    try:
        servers = await start_mcp_servers(config, builtin_names())
    except McpStartError as exc:
        print(f"commonos: {exc}", file=sys.stderr)
        return 1
    assert servers is not None
    try:
        down = 0
        for status in servers.status():
            note = "" if status.state == "ready" else f": {status.reason}"
            print(f"{status.name} ({status.kind}): {status.state}{note}")
            down += status.state != "ready"
            for tool in status.tools:
                print(f"  {tool_name(status.name, tool)}")
        return 1 if down else 0
    finally:
        await servers.stop()
