"""The terminal in its bubblewrap sandbox, run for real: real ``bwrap``, real shells.

The layout is the gateway's own: a data directory holding ``config.toml`` (with the bot
token) and the database (with another user's conversation), per-session workspaces under
it, and the token in the gateway process's environment. Every way out the issue names is
tried, and each must fail without the token in the output.
"""

from __future__ import annotations

import asyncio
import base64
import os
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.cancellation import CancellationToken, Cancelled
from core.tools.base import ToolContext, ToolResult
from core.tools.files import read_file_tool, write_file_tool
from core.tools.sandbox import (
    NO_BWRAP,
    Bubblewrap,
    NoSandbox,
    Unavailable,
    Workspaces,
    probe,
    workspace_name,
)
from core.tools.terminal import terminal_tool

TOKEN = "7345123456:AAF-sandbox-test-token-Zq81xKpW3mN0vB4"
OTHER_USERS_WORDS = "my diagnosis is confidential"
ME, OTHER = "telegram:group:-100:111", "telegram:group:-100:222"
WAIT = 10.0


@dataclass
class Host:
    home: Path
    config: Path
    database: Path
    workspaces: Workspaces
    sandbox: Bubblewrap

    async def run(self, command: str, *, key: str = ME, **options: object) -> ToolResult:
        tool = terminal_tool(workspaces=self.workspaces, sandbox=self.sandbox, **options)  # type: ignore[arg-type]
        return await tool.handler({"command": command}, context(key))


def context(key: str, token: CancellationToken | None = None) -> ToolContext:
    return ToolContext(
        session_key=key,
        session_id="s",
        turn_id="t",
        call_id="c",
        token=token or CancellationToken(),
        workspace=Path("/nonexistent"),
    )


async def sandbox_for(home: Path, config: Path, *, network: bool = False) -> Bubblewrap:
    found = await probe(network=network, hidden=(home, config))
    assert isinstance(found, Bubblewrap), f"bubblewrap must run here: {found}"
    return found


@pytest.fixture
async def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Host:
    monkeypatch.setenv("COMMONOS_TELEGRAM_TOKEN", TOKEN)
    home = tmp_path / "home"
    home.mkdir()
    config = home / "config.toml"
    config.write_text(f'[telegram]\ntoken = "{TOKEN}"\n')
    database = home / "commonos.db"
    database.write_text(f"alice: {OTHER_USERS_WORDS}\n")
    workspaces = Workspaces(home / "workspaces" / "default")
    other = workspaces.ensure(OTHER)
    (other / "notes.txt").write_text(OTHER_USERS_WORDS)
    return Host(home, config, database, workspaces, await sandbox_for(home, config))


def escapes(host: Host) -> dict[str, str]:
    other = host.workspaces.path_for(OTHER)
    return {
        "parent environ": "cat /proc/$PPID/environ",
        "init environ": "cat /proc/1/environ",
        "env": "env",
        "config, relative": "cat ../../../config.toml",
        "config, absolute": f"cat {host.config}",
        "database, relative": "cat ../../../commonos.db",
        "database, absolute": f"cat {host.database}",
        "other session, relative": f"cat ../{other.name}/notes.txt",
        "other session, absolute": f"cat {other}/notes.txt",
        "gateway environ by pid": f"cat /proc/{os.getpid()}/environ",
    }


@pytest.mark.parametrize(
    "name",
    [
        "parent environ",
        "init environ",
        "env",
        "config, relative",
        "config, absolute",
        "database, relative",
        "database, absolute",
        "other session, relative",
        "other session, absolute",
        "gateway environ by pid",
    ],
)
async def test_a_sandboxed_command_cannot_read_the_gateways_secrets(host: Host, name: str):
    result = await host.run(escapes(host)[name])
    assert TOKEN not in result.text and OTHER_USERS_WORDS not in result.text
    assert base64.b64encode(TOKEN.encode()).decode()[:40] not in result.text


async def test_the_sandbox_environment_is_the_allowlist_only(host: Host):
    result = await host.run("env | cut -d= -f1 | sort | tr '\\n' ' '")
    names = set(result.text.split("\n")[0].split())
    assert names <= {"PATH", "HOME", "TMPDIR", "TERM", "PWD", "SHLVL", "_", "LANG", "TZ"}
    assert {"PATH", "HOME"} <= names


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("/usr/planted", "Read-only file system"),
        ("/etc/planted", "Read-only file system"),
        ("/planted", "Read-only file system"),
        ("/var/planted", "Directory nonexistent"),  # not in the sandbox at all
    ],
)
async def test_a_sandboxed_command_cannot_write_outside_its_workspace(
    host: Host, target: str, why: str
):
    result = await host.run(f"echo owned > {target} && echo wrote")
    assert result.is_error and why in result.text and "wrote" not in result.text
    assert not await asyncio.to_thread(Path(target).exists)


@pytest.mark.parametrize("target", ["{home}/planted", "{workspaces}/../planted"])
async def test_writes_beside_the_workspace_never_reach_the_host(host: Host, target: str):
    """Here the data directory is under /tmp, which the sandbox replaces with its own
    empty tmpfs: a write there lands in that and is gone with the command."""
    path = target.format(home=host.home, workspaces=host.workspaces.root)
    await host.run(f"echo owned > {path}")
    assert not await asyncio.to_thread(Path(path).exists)


async def test_a_sandboxed_command_writes_into_its_own_workspace(host: Host):
    result = await host.run("echo made-here > note.txt && pwd")
    mine = host.workspaces.path_for(ME)
    assert result.text == f"{mine}\n[exit code 0]"
    assert (mine / "note.txt").read_text() == "made-here\n"


@pytest.fixture
async def listener() -> AsyncIterator[tuple[int, asyncio.Event]]:
    connected = asyncio.Event()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield port, connected
    finally:
        server.close()
        await server.wait_closed()


CONNECT = "bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected'"


async def test_without_network_a_loopback_port_cannot_be_reached(
    host: Host, listener: tuple[int, asyncio.Event]
):
    port, connected = listener
    result = await host.run(CONNECT.format(port=port))
    assert result.is_error and "connected" not in result.text.replace("Connection", "")
    assert not connected.is_set()


async def test_with_network_on_the_same_port_is_reached(
    host: Host, listener: tuple[int, asyncio.Event]
):
    port, connected = listener
    host.sandbox = await sandbox_for(host.home, host.config, network=True)
    result = await host.run(CONNECT.format(port=port))
    assert result.text.startswith("connected"), result.text
    await asyncio.wait_for(connected.wait(), WAIT)


async def read_pid_from_fifo(fifo: Path) -> int:
    text = await asyncio.wait_for(asyncio.to_thread(fifo.read_text), WAIT)
    return int(text.strip())


async def wait_until_gone(pid: int) -> None:
    """Wait on a pidfd (readable once the process has exited)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    gone = asyncio.Event()
    loop.add_reader(fd, gone.set)
    try:
        await asyncio.wait_for(gone.wait(), WAIT)
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def host_pid_of_sleep(marker: str) -> int:
    """The host pid of the sandboxed ``sleep <marker>`` (the sandbox has its own pids)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[:2] == [b"sleep", marker.encode()]:
                return int(entry.name)
    raise AssertionError(f"no sleep {marker} running")


STARTED = (
    'sleep {marker} & while [ "$(cat /proc/$!/comm)" != sleep ]; do :; done; '
    "echo started > go.fifo; wait"
)
"""A background ``sleep`` (seen exec'd before the test is told), then wait for it."""


async def test_timeout_kills_everything_the_sandboxed_command_started(host: Host):
    mine = host.workspaces.ensure(ME)
    os.mkfifo(mine / "go.fifo")
    marker = str(random.randint(100_000, 999_999))
    command = STARTED.format(marker=marker)
    running = asyncio.create_task(
        terminal_tool(workspaces=host.workspaces, sandbox=host.sandbox, timeout=30).handler(
            {"command": command, "timeout": 2}, context(ME)
        )
    )
    await read_pid_from_fifo_text(mine / "go.fifo")
    pid = await asyncio.to_thread(host_pid_of_sleep, marker)
    result = await asyncio.wait_for(running, WAIT)
    assert result.is_error and "timed out" in result.text
    await wait_until_gone(pid)


async def test_stop_kills_everything_the_sandboxed_command_started(host: Host):
    mine = host.workspaces.ensure(ME)
    os.mkfifo(mine / "go.fifo")
    token = CancellationToken()
    tool = terminal_tool(workspaces=host.workspaces, sandbox=host.sandbox)
    marker = str(random.randint(100_000, 999_999))
    command = STARTED.format(marker=marker)
    running = asyncio.create_task(tool.handler({"command": command}, context(ME, token)))
    await read_pid_from_fifo_text(mine / "go.fifo")
    pid = await asyncio.to_thread(host_pid_of_sleep, marker)
    token.cancel("user stop")
    with pytest.raises(Cancelled):
        await asyncio.wait_for(running, WAIT)
    await wait_until_gone(pid)


async def read_pid_from_fifo_text(fifo: Path) -> None:
    text = await asyncio.wait_for(asyncio.to_thread(fifo.read_text), WAIT)
    assert text.strip() == "started"


# when there is no sandbox ---------------------------------------------------------------
async def test_probe_reports_a_missing_bubblewrap():
    assert await probe("bwrap-that-is-not-installed") == Unavailable(NO_BWRAP)


async def test_probe_reports_a_bubblewrap_that_cannot_run():
    found = await probe("false")
    assert isinstance(found, Unavailable)
    assert found.reason.startswith("bubblewrap (bwrap) cannot run")


async def test_without_a_sandbox_the_terminal_refuses_and_runs_nothing(tmp_path: Path):
    tool = terminal_tool(workspaces=Workspaces(tmp_path), sandbox=Unavailable(NO_BWRAP))
    result = await tool.handler({"command": "touch ran"}, context(ME))
    assert result.is_error
    assert result.text.startswith("No sandbox is available, so the command was not run")
    assert NO_BWRAP in result.text
    assert not await asyncio.to_thread(lambda: any(tmp_path.rglob("ran")))


async def test_sandbox_none_runs_on_the_host_in_the_session_workspace(tmp_path: Path):
    tool = terminal_tool(workspaces=Workspaces(tmp_path), sandbox=NoSandbox())
    result = await tool.handler({"command": "pwd"}, context(ME))
    assert result.text == f"{tmp_path / workspace_name(ME)}\n[exit code 0]"


# workspaces ---------------------------------------------------------------------------
def test_each_session_gets_its_own_workspace_and_a_child_its_parents(tmp_path: Path):
    spaces = Workspaces(tmp_path)
    mine, other = spaces.path_for(ME), spaces.path_for(OTHER)
    assert mine != other and mine.parent == other.parent == tmp_path
    assert spaces.path_for(f"{ME}/child:t1:c1") == mine
    assert spaces.path_for("a:b") != spaces.path_for("a_b")
    assert "/" not in workspace_name("../../etc:x") and workspace_name("..") != ".."


def test_a_profile_scope_shares_one_workspace(tmp_path: Path):
    spaces = Workspaces(tmp_path, scope="profile")
    assert spaces.path_for(ME) == spaces.path_for(OTHER) == tmp_path


async def test_read_file_cannot_reach_another_sessions_workspace(host: Host):
    other = host.workspaces.path_for(OTHER)
    read = read_file_tool(workspaces=host.workspaces)
    result = await read.handler({"path": f"../{other.name}/notes.txt"}, context(ME))
    assert result.is_error and "escapes the workspace" in result.text


async def test_write_then_read_file_share_the_terminals_workspace(host: Host):
    write = write_file_tool(workspaces=host.workspaces)
    await write.handler({"path": "from-tool.txt", "content": "hello"}, context(ME))
    assert (await host.run("cat from-tool.txt")).text == "hello\n[exit code 0]"
