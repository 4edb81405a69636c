"""MCP tool calls: what the gateway adds over the bare SDK, and what 5 servers cost.

Rows: ``mcp-server-time``'s ``get_current_time`` over stdio and an in-process SDK server's
``echo`` over streamable HTTP, each called through the bare SDK ``Client`` and through the
gateway's registry tool (``core.mcp``: the supervised connection, deadline, token, result
mapping; stdio in bubblewrap when it runs here). Then the gateway process's RSS before and
after starting 5 stdio servers (the servers' own memory is theirs, in their processes).
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import uvicorn
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server.mcpserver import MCPServer

from bench.sizes import Sizes
from core.cancellation import CancellationToken
from core.mcp.servers import McpServers
from core.mcp.spec import HttpServer, ServerSpec, StdioServer
from core.tools.base import ToolContext
from core.tools.sandbox import Bubblewrap, probe

TIME_ARGS = {"timezone": "UTC"}
TIME = str(Path(sys.prefix) / "bin" / "mcp-server-time")


async def run(sizes: Sizes) -> None:
    calls = max(sizes.client_calls // 2, 50)
    box = await probe()
    sandbox = box if isinstance(box, Bubblewrap) else None
    with tempfile.TemporaryDirectory(prefix="commonos-bench-mcp-") as scratch:
        root = Path(scratch)
        print(f"MCP tool call latency, {calls} calls each (ms)")
        bare = await _bare_stdio(calls)
        ours = await _ours([_time_spec(root, "time", sandbox is not None)], sandbox, "time",
                           "get_current_time", TIME_ARGS, calls, root)  # fmt: skip
        _row("stdio, bare SDK", bare)
        _row(f"stdio, gateway tool{' (bwrap)' if sandbox else ''}", ours)
        async with _http_server() as url:
            bare = await _timed(calls, lambda c: c.call_tool("echo", {"text": "hi"}), url)
            spec = ServerSpec("echo", HttpServer(url))
            ours = await _ours([spec], None, "echo", "echo", {"text": "hi"}, calls, root)
        _row("HTTP, bare SDK", bare)
        _row("HTTP, gateway tool", ours)
        before = _rss()
        specs = [_time_spec(root, f"t{i}", sandbox is not None) for i in range(5)]
        servers = McpServers(specs, sandbox)
        await servers.start()
        after = _rss()
        await servers.stop()
        print(f"gateway RSS: {before / 1024:.1f} MB before, {after / 1024:.1f} MB with 5 stdio "
              f"servers ({(after - before) / 1024:+.1f} MB)")  # fmt: skip


def _time_spec(root: Path, name: str, sandboxed: bool) -> ServerSpec:
    directory = root / name
    directory.mkdir(exist_ok=True)
    transport = StdioServer(TIME, ("--local-timezone", "UTC"), {}, directory,
                            sandboxed)  # fmt: skip
    return ServerSpec(name, transport)


async def _bare_stdio(calls: int) -> list[float]:
    params = StdioServerParameters(command=TIME, args=["--local-timezone", "UTC"])
    return await _timed(calls, lambda c: c.call_tool("get_current_time", TIME_ARGS), params)


async def _timed(
    calls: int, call: Callable[[Client], Awaitable[object]], server: object
) -> list[float]:
    async with Client(server, mode="legacy", cache=None) as client:  # type: ignore[arg-type]
        await call(client)
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            await call(client)
            times.append((time.perf_counter() - started) * 1000)
    return times


async def _ours(specs: list[ServerSpec], sandbox: Bubblewrap | None, server: str, tool: str,
                args: dict[str, object], calls: int, root: Path) -> list[float]:  # fmt: skip
    servers = McpServers(specs, sandbox)
    await servers.start()
    registered = servers.tools().tool(f"mcp__{server}__{tool}")
    assert registered is not None
    ctx = ToolContext("bench", "s", "t", "c", CancellationToken(), root)
    times = []
    try:
        await registered.handler(dict(args), ctx)
        for _ in range(calls):
            started = time.perf_counter()
            await registered.handler(dict(args), ctx)
            times.append((time.perf_counter() - started) * 1000)
    finally:
        await servers.stop()
    return times


class _http_server:
    async def __aenter__(self) -> str:
        app = MCPServer("bench")

        @app.tool()
        def echo(text: str) -> str:
            return text

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        self.sock = sock
        self.server = uvicorn.Server(uvicorn.Config(app.streamable_http_app(), log_level="error"))
        self.task = asyncio.create_task(self.server.serve(sockets=[sock]))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"

    async def __aexit__(self, *exc: object) -> None:
        self.server.should_exit = self.server.force_exit = True
        await asyncio.wait({self.task}, timeout=5)
        self.sock.close()


def _row(label: str, times: list[float]) -> None:
    ordered = sorted(times)
    p95 = ordered[int(len(ordered) * 0.95) - 1]
    print(f"  {label:<32} p50 {statistics.median(ordered):6.2f}  p95 {p95:6.2f}")


def _rss() -> int:
    """This process's resident set, KB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0
