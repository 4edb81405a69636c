"""The ``terminal`` tool: run one shell command in the session's workspace.

Where and how it runs is the tool's :data:`~core.tools.sandbox.Sandbox`
(:mod:`core.tools.sandbox`): inside bubblewrap, seeing only the session's workspace and the
system read-only (the gateway wires every profile so, unless it says ``sandbox = "none"``);
on the host shell (:class:`~core.tools.sandbox.NoSandbox`, the default of this factory, for
embedding and tests); or not at all (:class:`~core.tools.sandbox.Unavailable`: every call is
an error result saying that no sandbox is available, and nothing runs).

The command runs through ``/bin/sh`` in its own process group (``start_new_session``), with
stdout and stderr merged. It ends in one of three ways:

* it exits: the result is its output and ``[exit code N]`` (non-zero is an error result;
  one a signal ended also names it: ``[exit code 152: CPU time limit exceeded]``);
* the timeout passes: the whole process group is killed; the result is an error with the
  output so far;
* the turn's token is cancelled: the process group is killed and
  :class:`~core.cancellation.Cancelled` propagates, so the turn stops at once.

In the sandbox, bubblewrap is the process group's leader and takes the command down with
it (``--die-with-parent``, and its PID namespace ends with it).

In the sandbox the profile's limits apply (:mod:`core.tools.limits`): the process cap,
memory, CPU time and file size are set on ``bwrap`` before it execs and inherited by the
command; the workspace's disk usage is measured before the command, watched while it runs
and measured after. A fourth ending: the usage passes the disk quota — the process group
is killed and the result (an error) says ``[stopped: the workspace passed its disk quota of
50 MB (used 50.3 MB); delete files to continue]``. A command that starts over quota still
runs, with no file able to grow (so the model can delete), and is told so; one that leaves
the workspace full says so too.

Output is capped (``max_output`` bytes kept, the rest counted as ``[truncated N bytes]``).
On the host shell the child's environment drops variables whose names look like secrets
(``*TOKEN*``, ``*KEY*``, ``*SECRET*``, ``*PASSWORD*``); in the sandbox it is built from an
allowlist. Risk is ``dangerous``; the built-in dangerous-command policy
(``core.hooks.builtin``) asks before known-destructive commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.tools.base import Tool, ToolContext, ToolResult
from core.tools.files import workspace_of
from core.tools.limits import (
    QuotaWatch,
    Sleep,
    disk_usage,
    full_note,
    over_quota_note,
    preexec,
)
from core.tools.sandbox import Bubblewrap, Launch, NoSandbox, Sandbox, Unavailable, Workspaces
from core.types import ToolSpec

DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 600.0
DEFAULT_MAX_OUTPUT = 16_000
KILL_WAIT_SECONDS = 2.0

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "Shell command to run (/bin/sh)."},
        "timeout": {
            "type": "number",
            "description": f"Seconds before the command is killed (max {MAX_TIMEOUT:g}).",
        },
    },
    "required": ["command"],
}


@dataclass(slots=True)
class _Output:
    """Merged output, keeping the first ``limit`` bytes and counting the rest."""

    limit: int
    kept: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def add(self, chunk: bytes) -> None:
        room = max(self.limit - len(self.kept), 0)
        self.kept += chunk[:room]
        self.dropped += max(len(chunk) - room, 0)

    def text(self) -> str:
        text = self.kept.decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n[truncated {self.dropped} bytes]"
        return text


def terminal_tool(
    *,
    workspace: Path | None = None,
    workspaces: Workspaces | None = None,
    sandbox: Sandbox | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_output: int = DEFAULT_MAX_OUTPUT,
    sleep: Sleep = asyncio.sleep,
) -> Tool:
    """The ``terminal`` tool. The working directory is the session's workspace from
    ``workspaces``; else ``workspace``; else ``ToolContext.workspace``. ``sandbox``
    defaults to :class:`~core.tools.sandbox.NoSandbox` (the host shell). ``sleep`` paces
    the disk quota's scans (injected in tests)."""
    chosen: Sandbox = sandbox if sandbox is not None else NoSandbox()

    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return ToolResult("terminal needs a non-empty 'command' string", is_error=True)
        if isinstance(chosen, Unavailable):
            return ToolResult(unavailable_text(chosen), is_error=True)
        limit = _timeout(args.get("timeout"), timeout)
        cwd = await workspace_of(ctx, workspace, workspaces)
        if not await asyncio.to_thread(cwd.is_dir):
            return ToolResult(f"cannot start the command in {cwd}: no such directory", True)
        launch = chosen.launch(command, cwd)
        if isinstance(chosen, Bubblewrap):
            return await run_limited(
                chosen, launch, cwd, timeout=limit, max_output=max_output, ctx=ctx, sleep=sleep
            )
        return await run_command(launch, timeout=limit, max_output=max_output, ctx=ctx)

    spec = ToolSpec(
        name="terminal",
        description="Run a shell command in the workspace and return its output.",
        parameters=PARAMETERS,
        risk="dangerous",
    )
    return Tool(spec=spec, handler=handler)


def unavailable_text(sandbox: Unavailable) -> str:
    """What the model (and the chat) hear when no sandbox can run the command."""
    return (
        f"No sandbox is available, so the command was not run: {sandbox.reason}. "
        'Install bubblewrap, or set sandbox = "none" for this profile.'
    )


def _timeout(requested: object, default: float) -> float:
    if isinstance(requested, int | float) and not isinstance(requested, bool) and requested > 0:
        return min(float(requested), MAX_TIMEOUT)
    return default


async def run_limited(
    sandbox: Bubblewrap,
    launch: Launch,
    workspace: Path,
    *,
    timeout: float,
    max_output: int,
    ctx: ToolContext,
    sleep: Sleep = asyncio.sleep,
) -> ToolResult:
    """Run ``launch`` under ``sandbox.limits``, its disk quota checked before, during and
    after (see the module docstring)."""
    limits = sandbox.limits
    used = await asyncio.to_thread(disk_usage, workspace)
    watch = QuotaWatch(limits, workspace, used, sleep)
    async with _cgroup(sandbox, workspace) as procs:
        confine = preexec(limits.rlimits(used, nproc=procs is None), procs)
        limited = dataclasses.replace(launch, preexec=confine)
        result = await run_command(
            limited, timeout=timeout, max_output=max_output, ctx=ctx, stop_when=watch
        )
    if watch.passed is not None:
        return result
    after = await asyncio.to_thread(disk_usage, workspace)
    if used >= limits.disk_quota:
        note = over_quota_note(limits, used, after)
        return _annotated(result, note, is_error=result.is_error or after >= limits.disk_quota)
    if after >= limits.disk_quota:
        return _annotated(result, full_note(limits, after))
    return result


@contextlib.asynccontextmanager
async def _cgroup(sandbox: Bubblewrap, workspace: Path) -> AsyncIterator[int | None]:
    """The fd a command's child writes itself into (None: no pids cgroup here)."""
    if sandbox.cgroups is None:
        yield None
        return
    async with sandbox.cgroups.joined(workspace, sandbox.limits.processes) as procs:
        yield procs


def _annotated(result: ToolResult, note: str, *, is_error: bool = True) -> ToolResult:
    return ToolResult(_noted(result.text, note), is_error=is_error)


async def run_command(
    launch: Launch,
    *,
    timeout: float,
    max_output: int,
    ctx: ToolContext,
    stop_when: Callable[[], Awaitable[str]] | None = None,
) -> ToolResult:
    """Run ``launch``; see the module docstring for how it ends. ``stop_when``, if given,
    is awaited alongside: once it returns (a note), the command is killed and the result
    is an error ending with that note."""
    ctx.token.raise_if_cancelled()
    try:
        proc = await asyncio.create_subprocess_exec(
            *launch.argv,
            cwd=launch.cwd,
            env=launch.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=launch.preexec,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return ToolResult(f"cannot start the command in {launch.cwd}: {exc}", is_error=True)
    output = _Output(max_output)
    # Tasks, not bare coroutines: guard() may refuse to start them (token already cancelled).
    collecting = asyncio.create_task(_collect(proc, output))
    stopping = None if stop_when is None else asyncio.create_task(_note(stop_when))
    try:
        code, note = await asyncio.wait_for(ctx.token.guard(_ending(collecting, stopping)), timeout)
    except TimeoutError:
        note = f"[timed out after {timeout:g} s; killed]"
        return ToolResult(_noted(output.text(), note), is_error=True)
    finally:
        tasks = {collecting} if stopping is None else {collecting, stopping}
        for task in tasks:
            task.cancel()
        await _kill_group(proc)
        await asyncio.wait(tasks)
    return ToolResult(_noted(output.text(), note), is_error=code != 0)


def exit_note(code: int) -> str:
    """``[exit code 0]``; one a signal ended names it: ``[exit code 152: CPU time limit
    exceeded]`` (the shell's 128 + N, or the process's own -N)."""
    number = code - 128 if code > 128 else -code
    try:
        name = signal.strsignal(number) if number > 0 else None
    except ValueError:
        name = None
    return f"[exit code {code}]" if name is None else f"[exit code {code}: {name}]"


async def _note(stop_when: Callable[[], Awaitable[str]]) -> str:
    return await stop_when()


async def _ending(
    collecting: asyncio.Task[int], stopping: asyncio.Task[str] | None
) -> tuple[int | None, str]:
    """``(exit code, note)`` when the command exits first, ``(None, note)`` when
    ``stopping`` decides first."""
    tasks: set[asyncio.Task[Any]] = {collecting} if stopping is None else {collecting, stopping}
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    if collecting.done() or stopping is None:
        code = await collecting
        return code, exit_note(code)
    return None, stopping.result()


def _noted(text: str, note: str) -> str:
    if not text or text.endswith("\n"):
        return text + note
    return f"{text}\n{note}"


async def _collect(proc: asyncio.subprocess.Process, output: _Output) -> int:
    assert proc.stdout is not None
    while chunk := await proc.stdout.read(65536):
        output.add(chunk)
    return await proc.wait()


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """Kill whatever the command left behind (its whole process group) and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), KILL_WAIT_SECONDS)
