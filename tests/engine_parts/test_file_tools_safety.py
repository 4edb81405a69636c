"""``read_file``/``write_file`` against a hostile workspace, run for real.

A conversation's own terminal can change its workspace while a file tool runs: swap a
directory for a symlink to the host thousands of times a second, make FIFOs and sockets,
link to devices, and fill the tools with calls that never end. None of it may read or write
outside the workspace, hold a call, or delay another conversation's file tools.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.cancellation import CancellationToken, Cancelled
from core.tools.base import ToolContext, ToolResult
from core.tools.files import FileWorkers, read_file_tool, workspace_of, write_file_tool
from core.tools.sandbox import Workspaces
from core.tools.terminal import terminal_tool

WAIT = 10.0
SECRET = "api_key = 'sk-HOST-SECRET-MARKER'"
SAFE = "model = 'workspace copy'"
ME, OTHER = "test:dm:hostile", "test:dm:bystander"

# Swaps two names (a directory and a symlink to the host) atomically, as fast as it can,
# until its stdin closes; then prints how many swaps it made.
SWAPPER = """
import ctypes, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
first, second = (name.encode() for name in sys.argv[1:3])
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
print("ready", flush=True)
swaps = 0
while not done.is_set():
    if libc.renameat2(-100, first, -100, second, 2) != 0:  # AT_FDCWD, RENAME_EXCHANGE
        raise OSError(ctypes.get_errno(), "renameat2")
    swaps += 1
print(swaps, flush=True)
"""


def context(key: str = ME, token: CancellationToken | None = None) -> ToolContext:
    return ToolContext(key, "s", "t", "c", token or CancellationToken(), Path("/nonexistent"))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


# the symlink swap race ------------------------------------------------------------------
@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A host directory the workspace must never reach: a secret and a sibling folder."""
    path = tmp_path / "host"
    (path / "sub").mkdir(parents=True)
    (path / "config.toml").write_text(SECRET)
    (path / "sub" / "config.toml").write_text(SECRET)
    return path


def _prepare_race(workspace: Path, host: Path) -> None:
    (workspace / "d" / "sub").mkdir(parents=True)
    (workspace / "d" / "config.toml").write_text(SAFE)
    (workspace / "d" / "sub" / "config.toml").write_text(SAFE)
    (workspace / "d_other").symlink_to(host)


Call = tuple[str, ToolResult]
"""The path a call was given and what it returned."""


async def _conversation_of_calls(workspace: Path, key: str, rounds: int) -> list[Call]:
    read, write = read_file_tool(workspace=workspace), write_file_tool(workspace=workspace)
    ctx, calls = context(key), []
    for number in range(rounds):
        for path in ("d/config.toml", "d/sub/config.toml"):
            calls.append((path, await read.handler({"path": path}, ctx)))
        for folder in ("d", "d/sub"):
            path = f"{folder}/new-{key[-1]}-{number}"
            calls.append((path, await write.handler({"path": path, "content": SAFE}, ctx)))
    return calls


async def _race(workspace: Path, rounds: int) -> tuple[list[Call], int]:
    """Four conversations of calls on ``d/...`` while ``d`` and ``d_other`` swap."""
    swapper = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SWAPPER, "d", "d_other", cwd=workspace,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert swapper.stdin is not None and swapper.stdout is not None
    assert await asyncio.wait_for(swapper.stdout.readline(), WAIT) == b"ready\n"
    try:
        conversations = [_conversation_of_calls(workspace, f"race:{n}", rounds) for n in range(4)]
        batches = await asyncio.gather(*conversations)
    finally:
        swapper.stdin.close()
        counted = await asyncio.wait_for(swapper.stdout.read(), WAIT)
        assert await asyncio.wait_for(swapper.wait(), WAIT) == 0
    return [call for batch in batches for call in batch], int(counted)


def _refusals(path: str) -> set[str]:
    """What a call on ``path`` may say when it meets ``d`` as the symlink (or mid-swap)."""
    return {
        f"path {path!r} escapes the workspace through the symlink 'd'; "
        "the file tools do not follow symlinks",
        f"path {path!r} cannot be resolved: 'd' is a symlink, "
        "and the file tools do not follow symlinks",
        "'d' changed while it was being opened; try again",
    }


def _real_directory(workspace: Path) -> Path:
    (real,) = [p for p in (workspace / "d", workspace / "d_other") if not p.is_symlink()]
    return real


def _files_under(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


async def test_a_directory_swapped_for_a_symlink_never_lets_a_call_out(workspace: Path, host: Path):
    _prepare_race(workspace, host)
    before = _files_under(host)
    calls, swaps = await _race(workspace, rounds=250)

    assert swaps >= 1000
    assert not [result for _, result in calls if "HOST-SECRET" in result.text]
    assert _files_under(host) == before
    served = [r for p, r in calls if p.endswith("config.toml") and not r.is_error]
    written = [r for p, r in calls if r.text == f"wrote {len(SAFE)} bytes to {p}"]
    refused = [(p, r) for p, r in calls if r.is_error]
    assert {r.text for r in served} == {SAFE}
    assert [(p, r.text) for p, r in refused if r.text not in _refusals(p)] == []
    assert len(served) + len(written) + len(refused) == len(calls)
    # everything written is in the workspace's own d: sub, two configs, and each write
    assert len(_files_under(_real_directory(workspace))) == 3 + len(written)
    assert served and written and refused  # the race was met both ways


# FIFOs, sockets, devices ----------------------------------------------------------------
async def test_write_file_on_a_fifo_the_terminal_made_is_refused_at_once(workspace: Path):
    made = await terminal_tool(workspace=workspace).handler({"command": "mkfifo p"}, context())
    assert made.text == "[exit code 0]"
    write = write_file_tool(workspace=workspace)
    written = await write.handler({"path": "p", "content": "x"}, context())
    read = await read_file_tool(workspace=workspace).handler({"path": "p"}, context())
    assert written == ToolResult("'p' is a FIFO, not a regular file", is_error=True)
    assert read == ToolResult("'p' is a FIFO, not a regular file", is_error=True)


async def test_a_fifo_with_a_reader_waiting_is_still_refused(workspace: Path):
    os.mkfifo(workspace / "p")
    reader = os.open(workspace / "p", os.O_RDONLY | os.O_NONBLOCK)
    try:
        write = write_file_tool(workspace=workspace)
        written = await write.handler({"path": "p", "content": "x"}, context())
        assert written == ToolResult("'p' is a FIFO, not a regular file", is_error=True)
        assert os.read(reader, 10) == b""
    finally:
        os.close(reader)


async def test_a_unix_socket_in_the_workspace_is_refused(workspace: Path):
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(workspace / "sock"))
        read = await read_file_tool(workspace=workspace).handler({"path": "sock"}, context())
        write = write_file_tool(workspace=workspace)
        written = await write.handler({"path": "sock", "content": "x"}, context())
    assert read == ToolResult("'sock' is a socket, not a regular file", is_error=True)
    assert written == ToolResult("'sock' is a socket, not a regular file", is_error=True)


@pytest.mark.parametrize("path", ["zero", "/dev/zero"])
async def test_a_device_is_out_of_reach_by_symlink_or_by_absolute_path(workspace: Path, path: str):
    (workspace / "zero").symlink_to("/dev/zero")
    read = await read_file_tool(workspace=workspace).handler({"path": path}, context())
    write = write_file_tool(workspace=workspace)
    written = await write.handler({"path": path, "content": "x"}, context())
    assert read.is_error and written.is_error
    assert read.text.startswith(f"path {path!r} escapes the workspace")
    assert written.text == read.text


async def test_a_directory_is_not_a_file_to_read_or_write(workspace: Path):
    (workspace / "d").mkdir()
    read = await read_file_tool(workspace=workspace).handler({"path": "d"}, context())
    write = write_file_tool(workspace=workspace)
    written = await write.handler({"path": "d/", "content": "x"}, context())
    assert read == ToolResult("'d' is a directory, not a regular file", is_error=True)
    assert written == read


async def test_a_symlink_inside_the_workspace_is_refused_too(workspace: Path):
    (workspace / "d").mkdir()
    (workspace / "d" / "x").write_text("inside")
    (workspace / "alias").symlink_to("d")
    read = await read_file_tool(workspace=workspace).handler({"path": "alias/x"}, context())
    assert read == ToolResult(
        "path 'alias/x' cannot be resolved: 'alias' is a symlink, "
        "and the file tools do not follow symlinks",
        is_error=True,
    )


async def test_a_file_below_a_file_is_one_clear_error(workspace: Path):
    (workspace / "f").write_text("plain")
    write = write_file_tool(workspace=workspace)
    written = await write.handler({"path": "f/x", "content": "x"}, context())
    assert written == ToolResult("'f' is a regular file, not a directory", is_error=True)


async def test_absolute_paths_and_dotdot_inside_the_workspace_still_work(workspace: Path):
    write, read = write_file_tool(workspace=workspace), read_file_tool(workspace=workspace)
    absolute = str(workspace / "a" / "b.txt")
    assert (await write.handler({"path": absolute, "content": "ok"}, context())).text == (
        f"wrote 2 bytes to {absolute}"
    )
    assert (await read.handler({"path": "a/../a/./b.txt"}, context())).text == "ok"


# no conversation can hold the file tools of another -------------------------------------
async def test_twelve_fifo_calls_of_one_conversation_do_not_hold_another(workspace: Path):
    spaces = Workspaces(workspace)
    mine = await workspace_of(context(ME), None, spaces)
    (await workspace_of(context(OTHER), None, spaces) / "notes.txt").write_text("mine")
    for number in range(12):
        os.mkfifo(mine / f"p{number}")
    write, read = write_file_tool(workspaces=spaces), read_file_tool(workspaces=spaces)
    hostile = [write.handler({"path": f"p{n}", "content": "x"}, context(ME)) for n in range(12)]
    bystander = read.handler({"path": "notes.txt"}, context(OTHER))
    *refused, answered = await asyncio.wait_for(asyncio.gather(*hostile, bystander), WAIT)
    assert answered == ToolResult("mine")
    assert [r.text for r in refused] == [f"'p{n}' is a FIFO, not a regular file" for n in range(12)]


@pytest.fixture
def hung() -> Iterator[threading.Event]:
    """Released at the end: stands for a file system that does not answer."""
    release = threading.Event()
    yield release
    release.set()


async def test_a_conversation_stuck_in_the_file_system_delays_no_other(
    workspace: Path, hung: threading.Event
):
    workers = FileWorkers(threads=2, seconds=2.0)
    (workspace / "notes.txt").write_text("still served")
    stuck = workers.submit(ME, hung.wait)
    read = read_file_tool(workspace=workspace, workers=workers)
    hostile = [
        asyncio.ensure_future(read.handler({"path": "notes.txt"}, context(ME))) for _ in range(12)
    ]
    bystander = await asyncio.wait_for(read.handler({"path": "notes.txt"}, context(OTHER)), WAIT)
    assert bystander == ToolResult("still served")
    assert not any(call.done() for call in hostile)  # queued behind the stuck one
    late = await asyncio.wait_for(asyncio.gather(*hostile), WAIT)
    assert {r.text for r in late} == {"read_file did not finish within 2 s and was given up"}
    assert not stuck.done()


async def test_stop_ends_a_file_call_that_waits(workspace: Path, hung: threading.Event):
    workers = FileWorkers(threads=2, seconds=60.0)  # the time box is not what ends it
    workers.submit(ME, hung.wait)
    token = CancellationToken()
    read = read_file_tool(workspace=workspace, workers=workers)
    call = asyncio.ensure_future(read.handler({"path": "x"}, context(ME, token)))
    await asyncio.wait_for(workers.run(context(OTHER), os.getpid), WAIT)  # call is queued
    assert not call.done()
    token.cancel("stopped")
    with pytest.raises(Cancelled):
        await asyncio.wait_for(call, WAIT)


@pytest.fixture
async def saturated_default_executor() -> Iterator[None]:
    """The loop's shared executor with its only thread blocked for the whole test."""
    loop = asyncio.get_running_loop()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    loop.set_default_executor(pool)
    gate = threading.Event()
    blocked = loop.run_in_executor(None, gate.wait)
    yield
    gate.set()
    await blocked


@pytest.mark.usefixtures("saturated_default_executor")
async def test_the_file_tools_never_use_the_loops_shared_executor(workspace: Path):
    spaces = Workspaces(workspace)
    write, read = write_file_tool(workspaces=spaces), read_file_tool(workspaces=spaces)
    written = await asyncio.wait_for(
        write.handler({"path": "n.txt", "content": "hi"}, context()), WAIT
    )
    assert written.text == "wrote 2 bytes to n.txt"
    assert (await asyncio.wait_for(read.handler({"path": "n.txt"}, context()), WAIT)).text == "hi"
    where = await asyncio.wait_for(workspace_of(context(OTHER), None, spaces), WAIT)
    assert where.is_dir()


# the disk quota -------------------------------------------------------------------------
QUOTA = 1024 * 1024


async def test_write_file_keeps_to_the_workspace_disk_quota(workspace: Path):
    """Repeated writes can never fill the disk: the one that would pass the quota is
    refused whole (nothing written), and replacing a file counts out its old size."""
    write = write_file_tool(workspace=workspace, disk_quota=QUOTA, max_write=QUOTA).handler
    chunk = "x" * 300_000
    results = [await write({"path": f"f{n}", "content": chunk}, context()) for n in range(5)]
    assert [r.is_error for r in results] == [False, False, False, True, True]
    assert "disk quota of 1 MB" in results[3].text and "nothing was written" in results[3].text
    assert sorted(os.listdir(workspace)) == ["f0", "f1", "f2"]
    appended = await write({"path": "f0", "content": chunk, "append": True}, context())
    assert appended.is_error and (workspace / "f0").stat().st_size == len(chunk)
    replaced = await write({"path": "f0", "content": chunk}, context())
    assert not replaced.is_error  # the old 300 kB are counted out
    (workspace / "f1").unlink()
    assert not (await write({"path": "f3", "content": chunk}, context())).is_error
