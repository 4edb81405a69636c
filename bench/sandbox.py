"""Sandbox start-up cost: the real terminal tool running ``true``, on the host shell and in
bubblewrap (each command its own ``bwrap``: namespaces, mounts, then ``/bin/sh -c true``).

The difference between the two rows is what the sandbox adds to every command. Without a
working ``bwrap`` only the host row is printed, with a note saying why.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.figures import Row, print_table
from bench.sizes import Sizes
from core.cancellation import CancellationToken
from core.tools.base import ToolContext
from core.tools.sandbox import Bubblewrap, NoSandbox, Sandbox, Workspaces, probe
from core.tools.terminal import terminal_tool


async def run(sizes: Sizes) -> None:
    with tempfile.TemporaryDirectory(prefix="commonos-bench-") as scratch:
        spaces = Workspaces(Path(scratch))
        bwrap = await probe()
        rows = [await _case("host shell (sandbox = none)", NoSandbox(), spaces, sizes)]
        notes = ["latency: terminal tool handler, command `true`, to its result"]
        if isinstance(bwrap, Bubblewrap):
            rows.append(await _case("bubblewrap (no network)", bwrap, spaces, sizes))
        else:
            notes.append(f"bubblewrap row skipped: {bwrap.reason}")
    print_table("sandbox start-up cost per command", rows, notes)


async def _case(what: str, sandbox: Sandbox, spaces: Workspaces, sizes: Sizes) -> Row:
    tool = terminal_tool(workspaces=spaces, sandbox=sandbox)
    context = ToolContext("bench:dm:1", "s", "t", "c", CancellationToken(), spaces.root)
    for _ in range(max(2, sizes.sandbox_runs // 10)):  # warm the page cache
        await tool.handler({"command": "true"}, context)
    latencies: list[float] = []
    started = time.perf_counter()
    for _ in range(sizes.sandbox_runs):
        begun = time.perf_counter()
        result = await tool.handler({"command": "true"}, context)
        latencies.append((time.perf_counter() - begun) * 1000)
        assert not result.is_error, result.text
    return Row(what, sizes.sandbox_runs, latencies, time.perf_counter() - started, unit="cmd")
