"""How the SDK reaches one server: a stdio child in the terminal's sandbox, or HTTP.

**Stdio.** The server runs under the same bubblewrap as the terminal
(:class:`core.tools.sandbox.Bubblewrap`): the system read-only, its ``directory``
read-write (working directory and ``HOME``), the Python environment the gateway runs from
read-only (where ``pip install mcp-server-time`` put the server), and an environment built
from scratch — the sandbox's ``PATH``/``HOME``/``LANG``/``TZ`` and the server's own ``env``,
nothing of the gateway's (``--clearenv``). No network unless ``network`` is set. The
sandbox's limits (the default profile's ``sandbox_memory``, ``sandbox_file_size`` and
``sandbox_processes``) are set by ``prlimit`` inside it, before the server (:func:`capped`;
no CPU-seconds limit, a server runs for days). Without
the sandbox (``sandbox = false``) the SDK's allow-listed environment (``HOME``, ``PATH``,
``USER``, ...) plus ``env`` — still none of the gateway's secrets.

**Watched.** Every transport's incoming stream is forwarded through :func:`watched`, which
sets an event once the server's side ends (the child exited, the stream broke): the
connection learns of a dead server while it is idle, not at the next call.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TextIO

import anyio
import httpx2
from mcp.client._transport import Transport, TransportStreams
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage

from core.mcp.spec import HttpServer, StdioServer
from core.tools.limits import Limits
from core.tools.sandbox import SANDBOX_PATH, SYSTEM_PATHS, Bubblewrap, sandbox_environment

HTTP_CONNECT_SECONDS = 10.0
PRLIMIT = shutil.which("prlimit", path="/usr/bin:/bin")
"""util-linux's ``prlimit``, seen from inside the sandbox (the system is mounted there);
without it a server runs without the limits."""


class NoSandbox(Exception):
    """The server must run in bubblewrap and bubblewrap cannot run here."""


def server_transport(
    transport: StdioServer | HttpServer, sandbox: Bubblewrap | str | None
) -> Transport:
    """The SDK transport for a server. ``sandbox``: the probed bubblewrap, or why there is
    none (a sandboxed stdio server then cannot start: :class:`NoSandbox`)."""
    if isinstance(transport, HttpServer):
        return _http(transport)
    return stdio_client(stdio_parameters(transport, sandbox), errlog=_errlog())


def stdio_parameters(
    server: StdioServer, sandbox: Bubblewrap | str | None
) -> StdioServerParameters:
    """The child's command line and environment (see the module docstring)."""
    command = shutil.which(server.command) or server.command
    if not server.sandbox:
        return StdioServerParameters(
            command=command, args=list(server.args), env=dict(server.env), cwd=server.directory
        )
    if not isinstance(sandbox, Bubblewrap):
        raise NoSandbox(sandbox or "no sandbox was prepared")
    wrap = Bubblewrap(
        sandbox.executable, server.network, sandbox.hidden, sandbox.limits, None, sandbox.cap_tmp
    )
    options = wrap.arguments(server.directory)[:-1]  # without the closing "--"
    at = options.index("--remount-ro")  # mounts go before the tree is made read-only
    options[at:at] = _readable(command)
    env = {**sandbox_environment(server.directory), "PATH": _path(), **server.env}
    for name, value in env.items():
        options += ["--setenv", name, value]
    limited = [*capped(sandbox.limits), command] if PRLIMIT else [command]
    return StdioServerParameters(
        command=sandbox.executable, args=[*options, "--", *limited, *server.args]
    )


def capped(limits: Limits) -> list[str]:
    """``prlimit`` run inside the sandbox before the server: the profile's memory (address
    space), file size and process limits. Not its CPU seconds: a server lives for days."""
    size = limits.disk_quota if limits.file_size is None else limits.file_size
    return [
        PRLIMIT or "prlimit",
        f"--as={limits.memory}",
        f"--fsize={size}",
        f"--nproc={limits.processes}",
        "--",
    ]


def _readable(command: str) -> list[str]:
    """Read-only binds for the gateway's Python (its environment and the installation it
    was made from) and the command's directory, where the sandbox does not show them."""
    found: list[str] = []
    wanted = (sys.prefix, sys.base_prefix, str(Path(command).resolve().parent))
    for path in sorted({Path(p).resolve() for p in wanted}):
        if path.is_dir() and not any(path.is_relative_to(p) for p in SYSTEM_PATHS):
            found += ["--ro-bind", str(path), str(path)]
    return found


def _path() -> str:
    return f"{Path(sys.prefix) / 'bin'}:{SANDBOX_PATH}"


def _errlog() -> TextIO:
    """Where a child's stderr goes: the gateway's own stderr (never into a prompt)."""
    return sys.__stderr__ or sys.stderr


@contextlib.asynccontextmanager
async def _http(server: HttpServer) -> AsyncIterator[TransportStreams]:
    timeout = httpx2.Timeout(HTTP_CONNECT_SECONDS, read=None)
    async with contextlib.AsyncExitStack() as stack:
        client = create_mcp_http_client(headers=dict(server.headers), timeout=timeout)
        await stack.enter_async_context(client)
        streams = streamable_http_client(server.url, http_client=client)
        yield await stack.enter_async_context(streams)


@contextlib.asynccontextmanager
async def watched(transport: Transport, ended: anyio.Event) -> AsyncIterator[TransportStreams]:
    """``transport``'s streams; ``ended`` is set once the server's side of it ends."""
    async with transport as (incoming, outgoing):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def forward() -> None:
            try:
                async with send:
                    async for item in incoming:
                        await send.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                ended.set()

        async with anyio.create_task_group() as group:
            group.start_soon(forward)
            try:
                yield receive, outgoing
            finally:
                group.cancel_scope.cancel()
