"""Sandbox start-up cost: the real terminal tool running ``true``, on the host shell and in
bubblewrap (each command its own ``bwrap``: namespaces, mounts, then ``/bin/sh -c true``),
without and with the profile limits (:mod:`core.tools.limits`: the workspace's pids cgroup
made and removed, rlimits set between fork and exec, the disk quota measured before and
after).

The differences between the rows are what the sandbox, then its limits, add to every
command. Without a working ``bwrap`` only the host row is printed, with a note saying why.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.figures import Row, print_table
from bench.sizes import Sizes
from core.cancellation import CancellationToken
from core.tools.base import ToolContext, ToolResult
from core.tools.limits import PidsCgroups, find_pids_cgroups
from core.tools.sandbox import Bubblewrap, NoSandbox, Sandbox, Workspaces, probe
from core.tools.terminal import run_command, terminal_tool

Run = Callable[[ToolContext], Awaitable[ToolResult]]


async def run(sizes: Sizes) -> None:
    with tempfile.TemporaryDirectory(prefix="commonos-bench-") as scratch:
        spaces = Workspaces(Path(scratch))
        cgroups = find_pids_cgroups()
        bwrap = await probe(cgroups=cgroups if isinstance(cgroups, PidsCgroups) else None)
        rows = [await _case("host shell (sandbox = none)", _tool(NoSandbox(), spaces), sizes)]
        notes = ["latency: terminal tool handler, command `true`, to its result"]
        if isinstance(bwrap, Bubblewrap):
            rows.append(await _case("bubblewrap, no limits", _unlimited(bwrap, spaces), sizes))
            how = "pids cgroup" if bwrap.cgroups is not None else "RLIMIT_NPROC"
            rows.append(await _case(f"bubblewrap + limits ({how})", _tool(bwrap, spaces), sizes))
        else:
            notes.append(f"bubblewrap rows skipped: {bwrap.reason}")
        if isinstance(cgroups, str):
            notes.append(f"no pids cgroup: {cgroups}")
    print_table("sandbox start-up cost per command", rows, notes)


def _tool(sandbox: Sandbox, spaces: Workspaces) -> Run:
    tool = terminal_tool(workspaces=spaces, sandbox=sandbox)
    return lambda context: tool.handler({"command": "true"}, context)


def _unlimited(sandbox: Bubblewrap, spaces: Workspaces) -> Run:
    """The sandbox as it was before the limits: the launch run as it is."""

    async def once(context: ToolContext) -> ToolResult:
        launch = sandbox.launch("true", spaces.ensure(context.session_key))
        return await run_command(launch, timeout=60, max_output=16_000, ctx=context)

    return once


async def _case(what: str, once: Run, sizes: Sizes) -> Row:
    context = ToolContext("bench:dm:1", "s", "t", "c", CancellationToken(), Path("/"))
    for _ in range(max(2, sizes.sandbox_runs // 10)):  # warm the page cache
        await once(context)
    latencies: list[float] = []
    started = time.perf_counter()
    for _ in range(sizes.sandbox_runs):
        begun = time.perf_counter()
        result = await once(context)
        latencies.append((time.perf_counter() - begun) * 1000)
        assert not result.is_error, result.text
    return Row(what, sizes.sandbox_runs, latencies, time.perf_counter() - started, unit="cmd")
