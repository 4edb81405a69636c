"""Real MCP servers for the tests: the reference servers and :mod:`tests.mcp.server` over
stdio (each in the bubblewrap sandbox, as the gateway runs them), the test server over
streamable HTTP in the test's own event loop (uvicorn on a socket bound to 127.0.0.1)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import uvicorn

from core.mcp.connection import Backoff
from core.mcp.servers import McpServers
from core.mcp.spec import HttpServer, ServerSpec, StdioServer
from core.tools.limits import DEFAULT_LIMITS, Limits
from core.tools.sandbox import Bubblewrap, Unavailable, probe
from tests.mcp.server import Seen, build

SERVER_FILE = Path(__file__).with_name("server.py")
BUILTIN = ("terminal", "read_file", "write_file", "send_file", "clarify", "delegate")
QUICK = Backoff(first=0.05, most=0.2)
"""Restarts within a test's patience."""


async def sandbox(limits: Limits = DEFAULT_LIMITS) -> Bubblewrap:
    found = await probe(limits=limits)
    assert not isinstance(found, Unavailable), found.reason
    return found


def stdio_test_server(name: str, directory: Path, **changes: object) -> ServerSpec:
    """:mod:`tests.mcp.server` over stdio: the file copied into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(SERVER_FILE, directory / "server.py")
    env = dict(changes.pop("env", {}) or {})  # type: ignore[call-overload]
    transport = StdioServer(sys.executable, ("server.py",), env, directory)
    return ServerSpec(name, transport, **changes)  # type: ignore[arg-type]


def reference_server(name: str, command: str, args: Sequence[str], directory: Path) -> ServerSpec:
    directory.mkdir(parents=True, exist_ok=True)
    return ServerSpec(name, StdioServer(command, tuple(args), {}, directory))


def http_server(name: str, url: str, **changes: object) -> ServerSpec:
    return ServerSpec(name, HttpServer(url), **changes)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def serving(seen: Seen) -> AsyncIterator[str]:
    """The test server over streamable HTTP; yields its URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(build(seen).streamable_http_app(), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    sock.listen()  # connections wait in the backlog until uvicorn takes them
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        server.force_exit = True
        await asyncio.wait({task}, timeout=5)
        sock.close()


@contextlib.asynccontextmanager
async def started(
    specs: Sequence[ServerSpec], box: Bubblewrap | None = None
) -> AsyncIterator[McpServers]:
    servers = McpServers(specs, box, backoff=QUICK)
    await servers.start(["terminal", "read_file", "write_file", "send_file", "clarify", "delegate"])
    try:
        yield servers
    finally:
        await servers.stop()


def git_repo(path: Path) -> Path:
    """A throw-away repository with one commit."""
    path.mkdir(parents=True)
    run = {"cwd": path, "check": True, "capture_output": True}
    subprocess.run(["git", "init", "-q", "-b", "main"], **run)  # type: ignore[call-overload]
    (path / "README.md").write_text("hello\n")
    subprocess.run(["git", "add", "."], **run)  # type: ignore[call-overload]
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first"], **run
    )  # type: ignore[call-overload]
    return path


def branches(repo: Path) -> list[str]:
    out = subprocess.run(
        ["git", "branch", "--format=%(refname:short)"], cwd=repo, capture_output=True, text=True
    )
    return sorted(out.stdout.split())
