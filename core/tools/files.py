"""``read_file`` and ``write_file``: regular files beneath the workspace, nothing else.

The workspace is the session's (from :class:`~core.tools.sandbox.Workspaces`, the same
one the terminal uses) when the tool is given ``workspaces``; else the fixed ``workspace``;
else ``ToolContext.workspace``. The sandboxed terminal of the same conversation may change
that directory while a file tool runs, so a path is never resolved first and opened later
(README "Tools and the sandbox"; :mod:`core.tools.beneath` says how it is opened):

* it is taken relative to the workspace; ``..`` is collapsed by name and may not climb
  above the workspace, and an absolute path must point inside it, else the call is an error
  result (``path '../x' escapes the workspace``) and nothing is read or written;
* every component is opened relative to the one before without following symlinks: a
  symlink anywhere on the path is refused, wherever it points ("path 'd/x' cannot be
  resolved: 'd' is a symlink, and the file tools do not follow symlinks"; one pointing out
  of the workspace is reported as escaping it);
* only regular files are read or written: a directory, FIFO, socket or device is refused at
  once (``'p' is a FIFO, not a regular file``) — it is opened non-blocking, so a FIFO
  nobody reads cannot hold the call;
* ``write_file`` creates missing directories one at a time, the same way.

Reads return at most ``max_read`` bytes (with a ``[truncated N bytes]`` note); writes
larger than ``max_write`` bytes are refused whole. With a ``disk_quota`` (the profile's
``sandbox_disk_quota_mb``, the terminal's quota too) a write that would leave the workspace
holding more than the quota is refused whole and nothing is written ("write_file refused:
… disk quota of 50 MB …; delete files to continue"): the workspace is measured before each
write (:func:`core.tools.limits.disk_usage`), the replaced file's own size counted out.

The file work runs on :class:`FileWorkers` — threads of its own, never the event loop's
default executor that everything else shares: at most :data:`FILE_THREADS` calls at a
time overall and one at a time per conversation (a conversation's calls queue behind each
other, so a conversation holds at most one thread). A call is time-boxed to
:data:`FILE_TOOL_SECONDS` (queueing included) and then an error result, and ``/stop``
(the call's token) ends it at once; the thread finishes the system call it is in on its
own. :func:`workspace_of` (the terminal's too) creates the session's workspace there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from core.tools.base import Tool, ToolContext, ToolResult
from core.tools.beneath import BadPath, Missing, open_regular
from core.tools.limits import disk_usage, megabytes
from core.tools.sandbox import Workspaces
from core.types import ToolSpec

T = TypeVar("T")

DEFAULT_MAX_READ = 64_000
DEFAULT_MAX_WRITE = 1_000_000
FILE_TOOL_SECONDS = 10.0
"""How long one file-tool call may take, waiting for its turn included; then an error."""
FILE_THREADS = 4
"""Threads of the shared :class:`FileWorkers`: file calls in flight at once, overall."""

_PATH = {"type": "string", "description": "Path relative to the workspace."}


@dataclass(frozen=True, slots=True)
class _Job:
    conversation: str
    work: Callable[[], Any]
    future: concurrent.futures.Future[Any]


class FileWorkers:
    """Daemon threads for file work, one job at a time per conversation.

    A conversation's jobs run in the order they came, each after the one before it has
    ended (not merely been given up on), so however many calls a conversation makes, and
    however long the file system takes to answer one, it occupies one thread. A job given up
    on before it started is dropped. The threads are daemons: one stuck in the kernel does
    not hold the process at exit.
    """

    def __init__(self, threads: int = FILE_THREADS, seconds: float = FILE_TOOL_SECONDS) -> None:
        self.seconds = seconds
        self._threads = threads
        self._started = False
        self._lock = threading.Lock()
        self._ready: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._behind: dict[str, deque[_Job]] = {}
        """Conversations with a job queued or running -> their jobs waiting behind it."""

    async def run(self, ctx: ToolContext, work: Callable[[], T]) -> T:
        """``work()`` on a file thread, under ``ctx.token``; ``TimeoutError`` after
        :attr:`seconds`, :class:`~core.cancellation.Cancelled` on ``/stop``."""
        conversation = ctx.session_key.partition("/child:")[0]
        future = asyncio.wrap_future(self.submit(conversation, work))
        return await asyncio.wait_for(ctx.token.guard(future), self.seconds)

    def submit(self, conversation: str, work: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Queue ``work`` behind ``conversation``'s earlier jobs; its future."""
        job = _Job(conversation, work, concurrent.futures.Future())
        with self._lock:
            self._start()
            behind = self._behind.get(conversation)
            if behind is None:
                self._behind[conversation] = deque()
                self._ready.put(job)
            else:
                behind.append(job)
        return job.future

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        for number in range(self._threads):
            name = f"file-tools-{number}"
            threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        while True:
            job = self._ready.get()
            try:
                if job.future.set_running_or_notify_cancel():
                    _settle(job)
            finally:
                self._next_of(job.conversation)

    def _next_of(self, conversation: str) -> None:
        with self._lock:
            behind = self._behind[conversation]
            if behind:
                self._ready.put(behind.popleft())
            else:
                del self._behind[conversation]


def _settle(job: _Job) -> None:
    try:
        result = job.work()
    except Exception as exc:
        job.future.set_exception(exc)
    else:
        job.future.set_result(result)


SHARED_WORKERS = FileWorkers()
"""The file threads of the process (the tools' default); they start with the first call."""


async def workspace_of(
    ctx: ToolContext, workspace: Path | None, workspaces: Workspaces | None
) -> Path:
    """The directory a call of ``ctx`` works in (see the module docstring)."""
    if workspaces is None:
        return workspace or ctx.workspace
    return await SHARED_WORKERS.run(ctx, partial(workspaces.ensure, ctx.session_key))


def _place(ctx: ToolContext, workspace: Path | None, workspaces: Workspaces | None) -> Path:
    """:func:`workspace_of`, on the file thread that then opens the file."""
    if workspaces is None:
        return workspace or ctx.workspace
    return workspaces.ensure(ctx.session_key)


def read_file_tool(
    *,
    workspace: Path | None = None,
    workspaces: Workspaces | None = None,
    max_read: int = DEFAULT_MAX_READ,
    workers: FileWorkers = SHARED_WORKERS,
) -> Tool:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = args.get("path")
        if not isinstance(path, str) or not path:
            return ToolResult("read_file needs a 'path' string", is_error=True)
        where = partial(_place, ctx, workspace, workspaces)
        return await _time_boxed("read_file", workers, ctx, partial(_read, where, path, max_read))

    spec = ToolSpec(
        name="read_file",
        description="Read a text file from the workspace.",
        parameters={"type": "object", "properties": {"path": _PATH}, "required": ["path"]},
        risk="safe",
    )
    return Tool(spec=spec, handler=handler)


def _read(where: Callable[[], Path], shown: str, max_read: int) -> ToolResult:
    try:
        fd = open_regular(where(), shown, os.O_RDONLY)
        with open(fd, "rb") as handle:
            size = os.fstat(fd).st_size
            data = handle.read(max_read)
    except Missing:
        return ToolResult(f"{shown} is not a file", is_error=True)
    except (BadPath, OSError) as exc:
        return ToolResult(_describe(exc), is_error=True)
    text = data.decode("utf-8", errors="replace")
    if size > len(data):
        text += f"\n[truncated {size - len(data)} bytes]"
    return ToolResult(text)


def write_file_tool(
    *,
    workspace: Path | None = None,
    workspaces: Workspaces | None = None,
    max_write: int = DEFAULT_MAX_WRITE,
    disk_quota: int | None = None,
    workers: FileWorkers = SHARED_WORKERS,
) -> Tool:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path, content = args.get("path"), args.get("content")
        if not isinstance(path, str) or not path or not isinstance(content, str):
            return ToolResult("write_file needs 'path' and 'content' strings", is_error=True)
        data = content.encode("utf-8")
        if len(data) > max_write:
            limit = f"content is {len(data)} bytes; the limit is {max_write}"
            return ToolResult(limit, is_error=True)
        where = partial(_place, ctx, workspace, workspaces)
        work = partial(_write, where, path, data, bool(args.get("append")), disk_quota)
        return await _time_boxed("write_file", workers, ctx, work)

    spec = ToolSpec(
        name="write_file",
        description="Write (or append) text to a file in the workspace; creates directories.",
        parameters={
            "type": "object",
            "properties": {
                "path": _PATH,
                "content": {"type": "string"},
                "append": {"type": "boolean", "description": "Append instead of replacing."},
            },
            "required": ["path", "content"],
        },
        risk="moderate",
    )
    return Tool(spec=spec, handler=handler)


def _write(
    where: Callable[[], Path], shown: str, data: bytes, append: bool, quota: int | None
) -> ToolResult:
    # No O_TRUNC: nothing is changed before fstat has shown a regular file.
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0)
    try:
        workspace = where()
        refusal = _past_quota(workspace, shown, len(data), append, quota)
        if refusal is not None:
            return ToolResult(refusal, is_error=True)
        fd = open_regular(workspace, shown, flags, make_dirs=True)
        with open(fd, "wb") as handle:
            if not append:
                handle.truncate(0)
            handle.write(data)
    except (BadPath, OSError) as exc:
        return ToolResult(_describe(exc), is_error=True)
    return ToolResult(f"wrote {len(data)} bytes to {shown}")


def _past_quota(
    workspace: Path, shown: str, size: int, append: bool, quota: int | None
) -> str | None:
    """Why writing ``size`` bytes to ``shown`` would pass ``quota``, or None. Measured
    before anything is created, so a refused write leaves no empty file behind."""
    if quota is None:
        return None
    used = disk_usage(workspace)
    replaced = 0 if append else _allocated(workspace, shown)
    if used - replaced + size <= quota:
        return None
    return (
        f"write_file refused: the workspace would pass its disk quota of {megabytes(quota)} "
        f"(used {megabytes(used)}, this write {megabytes(size)}); nothing was written; "
        "delete files to continue"
    )


def _allocated(workspace: Path, shown: str) -> int:
    """Bytes on disk of the regular file ``shown`` now (0 when there is none yet)."""
    try:
        fd = open_regular(workspace, shown, os.O_RDONLY)
    except (BadPath, OSError):
        return 0  # missing, or refused: the real open reports it
    try:
        return os.fstat(fd).st_blocks * 512
    finally:
        os.close(fd)


async def _time_boxed(
    name: str, workers: FileWorkers, ctx: ToolContext, work: Callable[[], ToolResult]
) -> ToolResult:
    try:
        return await workers.run(ctx, work)
    except TimeoutError:
        late = f"{name} did not finish within {workers.seconds:g} s and was given up"
        return ToolResult(late + _UNFINISHED.get(name, ""), is_error=True)


_UNFINISHED = {"write_file": "; the write may still complete"}


def _describe(exc: Exception) -> str:
    if isinstance(exc, BadPath):
        return str(exc)
    if isinstance(exc, OSError):
        return f"{exc.strerror or type(exc).__name__}: {exc.filename or ''}".rstrip(": ")
    return str(exc)
