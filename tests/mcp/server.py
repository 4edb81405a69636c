"""A real MCP server, written with the SDK, that misbehaves on request (tests/mcp).

Tools: ``echo`` (read-only), ``hang`` (never answers; in-process, :class:`Seen` records that
it started and that the client cancelled it), ``crash`` (the process exits at once),
``fail`` (an ``isError`` result), ``picture`` (a 1x1 PNG), ``environment`` (the server's
own environment as JSON, to check from inside what reached it) and ``grow`` (adds the tool
``extra`` and tells the client its tool list changed); ``freeze`` (blocks the whole server:
nothing is answered any more, as a hung server), ``note`` (not read-only: asked first),
``limits`` (the process's rlimits as JSON), ``pid`` (the process's pid, a random id made
at its start and a count of its calls: which process answered) and ``x__echo`` (whose
registry name, under the server ``odd``, is the one ``echo`` gets under a server
``odd__x``: a name clash).

Run over stdio (``python server.py``: the file is copied into the server's directory, as
the sandbox shows nothing else) or served over streamable HTTP in the test's event loop
(``build(seen).streamable_http_app()``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import resource
import time
import uuid
from dataclasses import dataclass, field

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import ToolAnnotations

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
READ_ONLY = ToolAnnotations(read_only_hint=True)
PROCESS = uuid.uuid4().hex
"""This process's own id (a pid inside the sandbox's namespace repeats across sandboxes)."""


@dataclass
class Seen:
    """What the server saw (in-process only)."""

    hanging: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)


def build(seen: Seen | None = None) -> MCPServer:
    """A fresh server with its own tool list."""
    seen = seen or Seen()
    server = MCPServer("misbehaving")
    counted = {"pid": 0}

    @server.tool(annotations=READ_ONLY)
    def echo(text: str) -> str:
        """Say the text back."""
        return f"echo: {text}"

    @server.tool(annotations=READ_ONLY)
    async def hang() -> str:
        """Never answer."""
        seen.hanging.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.cancelled.set()
            raise
        return "unreachable"

    @server.tool(annotations=READ_ONLY)
    def crash() -> str:
        """Exit the server process at once."""
        os._exit(3)

    @server.tool(annotations=READ_ONLY)
    def fail(why: str = "it broke") -> str:
        """Always an error."""
        raise ToolError(f"fail: {why}")

    @server.tool(annotations=READ_ONLY)
    def picture() -> Image:
        """A 1x1 PNG."""
        return Image(data=PNG, format="png")

    @server.tool(annotations=READ_ONLY)
    def environment() -> str:
        """This process's environment."""
        return json.dumps(dict(os.environ))

    @server.tool(annotations=READ_ONLY)
    async def grow(ctx: Context) -> str:
        """Add the tool ``extra`` and say the list changed."""
        server.add_tool(lambda: "extra here", name="extra", description="Added at run time.")
        await ctx.session.send_tool_list_changed()
        return "grown"

    @server.tool(annotations=READ_ONLY)
    async def freeze() -> str:
        """Block the server's event loop: nothing is answered any more."""
        time.sleep(3600)  # noqa: ASYNC251 - the point: the loop answers nothing more
        return "unreachable"

    @server.tool()
    def note(text: str) -> str:
        """Keep a note (not read-only)."""
        return f"noted: {text}"

    @server.tool(annotations=READ_ONLY)
    def limits() -> str:
        """This process's address-space, file-size and process rlimits."""
        wanted = {"as": resource.RLIMIT_AS, "fsize": resource.RLIMIT_FSIZE,
                  "nproc": resource.RLIMIT_NPROC}  # fmt: skip
        return json.dumps({name: resource.getrlimit(which)[0] for name, which in wanted.items()})

    @server.tool(annotations=READ_ONLY)
    def pid() -> str:
        """This process's id and how many times this tool was called in it."""
        counted["pid"] += 1
        return json.dumps({"pid": os.getpid(), "process": PROCESS, "calls": counted["pid"]})

    @server.tool(name="x__echo", annotations=READ_ONLY)
    def x_echo(text: str) -> str:
        """Say the text back (a second name)."""
        return f"echo: {text}"

    return server


if __name__ == "__main__":
    build().run()
