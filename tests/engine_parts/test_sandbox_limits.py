"""Per-conversation limits of the terminal's bubblewrap sandbox, run for real: real
``bwrap``, the real terminal tool, the machine's pids cgroup, a real SQLite file.

Small caps keep it quick: a fork bomb against 24 processes, disk fillers against a 16 MB
quota. The layout is the gateway's: a data directory holding the database, the
conversations' workspaces beneath it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sqlite3
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from core.cancellation import CancellationToken, Cancelled
from core.tools.base import ToolContext, ToolResult
from core.tools.limits import (
    Limits,
    MiB,
    PidsCgroups,
    QuotaWatch,
    disk_usage,
    find_pids_cgroups,
)
from core.tools.sandbox import Bubblewrap, Workspaces, probe
from core.tools.terminal import terminal_tool
from gateway.config import ConfigError, load_config, render_config
from gateway.turns.containment import prepare_sandboxes

HOSTILE, ME = "telegram:dm:666", "telegram:dm:111"
CAP = 24
QUOTA = 16 * MiB
WAIT = 20.0
POLLS = 2000
"""Bound of a poll loop on a condition (each pass yields 10 ms)."""

BOMB = "bomb(){ bomb | bomb & }; bomb; exec sleep 60"
"""The classic fork bomb (its shell then waits without forking again)."""

PACED_FILLER = "for i in $(seq 20); do head -c 5M /dev/zero > f$i; sleep 0.2; done; echo wrote-all"
"""100 MB in 5 MB files, a file every 0.2 s (the quota's scans run every 0.05 s)."""


@dataclass
class Box:
    home: Path
    database: Path
    workspaces: Workspaces
    sandbox: Bubblewrap
    cgroups: PidsCgroups

    async def run(
        self,
        command: str,
        *,
        key: str = ME,
        token: CancellationToken | None = None,
        timeout: float = WAIT,
    ) -> ToolResult:
        tool = terminal_tool(workspaces=self.workspaces, sandbox=self.sandbox, timeout=timeout)
        return await tool.handler({"command": command}, context(key, token))

    def group_of(self, key: str) -> Path:
        return self.cgroups.path_of(self.workspaces.path_for(key))


def context(key: str, token: CancellationToken | None = None) -> ToolContext:
    return ToolContext(key, "s", "t", "c", token or CancellationToken(), Path("/nonexistent"))


def make_database(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("create table messages (who text, body text)")
        db.execute("insert into messages values ('alice', 'hello')")
    db.close()


def database_rows(path: Path) -> list[tuple[str, str]]:
    db = sqlite3.connect(path)
    try:
        assert db.execute("pragma integrity_check").fetchone() == ("ok",)
        return db.execute("select who, body from messages").fetchall()
    finally:
        db.close()


@pytest.fixture
async def box(tmp_path: Path) -> Box:
    home = tmp_path / "data"
    home.mkdir()
    database = home / "commonos.db"
    make_database(database)
    cgroups = find_pids_cgroups()
    assert isinstance(cgroups, PidsCgroups), f"a writable pids cgroup must exist here: {cgroups}"
    limits = Limits(processes=CAP, disk_quota=QUOTA, scan_interval=0.05)
    found = await probe(hidden=(home,), limits=limits, cgroups=cgroups)
    assert isinstance(found, Bubblewrap), f"bubblewrap must run here: {found}"
    return Box(home, database, Workspaces(home / "workspaces" / "default"), found, cgroups)


def pids_of(group: Path) -> int:
    try:
        return int((group / "pids.current").read_text())
    except (OSError, ValueError):
        return 0


async def until_capped(group: Path) -> int:
    """Poll the cgroup until a fork was refused at the cap; the most processes seen."""
    most = 0
    for _ in range(POLLS):
        most = max(most, pids_of(group))
        if refused_forks(group) > 0:
            return most
        await asyncio.sleep(0.01)
    raise AssertionError(f"the fork bomb never reached the cap (most seen: {most})")


def refused_forks(group: Path) -> int:
    try:
        events = (group / "pids.events").read_text().split()
    except OSError:
        return 0
    return int(events[1]) if events[:1] == ["max"] else 0


def peak_of(group: Path, seen: int) -> int:
    try:
        return max(seen, int((group / "pids.peak").read_text()))
    except (OSError, ValueError):
        return seen


async def stop_hostile(token: CancellationToken, hostile: asyncio.Task[ToolResult]) -> None:
    """Stop a hostile command: it is cancelled, unless the cap already ended it (a shell
    whose own fork is refused exits with an error)."""
    token.cancel("test over")
    try:
        ended = await asyncio.wait_for(hostile, WAIT)
    except Cancelled:
        return
    assert ended.is_error, ended.text


# processes ----------------------------------------------------------------------------
async def test_a_fork_bomb_stays_under_the_cap_while_another_conversation_runs(box: Box) -> None:
    token = CancellationToken()
    hostile = asyncio.create_task(box.run(BOMB, key=HOSTILE, token=token, timeout=60))
    group = box.group_of(HOSTILE)
    seen = await until_capped(group)
    other = await box.run("echo still here", key=ME)
    peak = peak_of(group, seen)
    await stop_hostile(token, hostile)
    assert other.text == "still here\n[exit code 0]"
    assert 0 < peak <= CAP
    assert not group.exists(), "the conversation's cgroup goes with its last command"


SLEEPERS = "for i in $(seq 15); do sleep 60 & done; echo started; exec sleep 60"
"""15 sleepers that stay (a fork bomb's processes come and go as forks fail)."""


async def test_commands_of_one_conversation_share_its_process_cap(box: Box) -> None:
    token = CancellationToken()
    first = asyncio.create_task(box.run(SLEEPERS, key=HOSTILE, token=token, timeout=60))
    group = box.group_of(HOSTILE)
    await until_processes(group, 15)
    second = asyncio.create_task(box.run(SLEEPERS, key=HOSTILE, token=token, timeout=60))
    seen = await until_capped(group)
    peak = peak_of(group, seen)
    await stop_hostile(token, first)
    await stop_hostile(token, second)
    assert peak <= CAP


async def until_processes(group: Path, count: int) -> None:
    for _ in range(POLLS):
        if pids_of(group) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {count} processes in {group}")


# disk ---------------------------------------------------------------------------------
async def test_a_100_mb_write_stops_at_the_quota_and_the_database_is_untouched(box: Box) -> None:
    before = hashlib.sha256(box.database.read_bytes()).hexdigest()
    result = await box.run("head -c 100M /dev/zero > big")
    big = box.workspaces.path_for(ME) / "big"
    assert result.is_error and "File size limit exceeded" in result.text
    assert "[the workspace is full: disk quota 16 MB, used 16 MB" in result.text
    assert "delete files to continue]" in result.text
    assert big.stat().st_size <= QUOTA
    assert hashlib.sha256(box.database.read_bytes()).hexdigest() == before
    assert database_rows(box.database) == [("alice", "hello")]


async def test_many_5_mb_files_are_stopped_once_they_pass_the_quota(box: Box) -> None:
    result = await box.run(PACED_FILLER)
    used = await asyncio.to_thread(disk_usage, box.workspaces.path_for(ME))
    assert result.is_error and "wrote-all" not in result.text
    assert "[stopped: the workspace passed its disk quota of 16 MB (used " in result.text
    assert result.text.endswith("MB); delete files to continue]")
    assert QUOTA < used < 100 * MiB
    assert database_rows(box.database) == [("alice", "hello")]


async def test_a_filler_faster_than_the_scans_leaves_no_file_able_to_grow(box: Box) -> None:
    """Unpaced, 20 files may land between two scans: the check after the command tells
    the model, and the next command cannot grow any file — only delete."""
    filled = await box.run("for i in $(seq 20); do head -c 5M /dev/zero > f$i; done")
    assert filled.is_error and "disk quota of 16 MB" in filled.text
    grow = await box.run("echo more >> f1 && echo grew")
    assert "grew" not in grow.text and "over its disk quota of 16 MB" in grow.text
    freed = await box.run("rm f* && echo freed")
    assert freed.text.startswith("freed\n") and "it now uses 0 MB" in freed.text
    again = await box.run("echo fine > note && cat note")
    assert again.text == "fine\n[exit code 0]"


async def test_the_sandbox_tmp_is_capped_at_the_quota(box: Box) -> None:
    result = await box.run(
        "for i in $(seq 8); do head -c 5M /dev/zero > /tmp/f$i; done; df -B1 /tmp"
    )
    assert "No space left on device" in result.text
    assert f" {QUOTA} " in result.text.splitlines()[-2]  # df: the size of /tmp


# memory, CPU, file size ---------------------------------------------------------------
async def test_memory_beyond_the_limit_is_refused(box: Box) -> None:
    box.sandbox = replace(box.sandbox, limits=replace(box.sandbox.limits, memory=128 * MiB))
    result = await box.run("python3 -c 'x = bytearray(400 * 1024 * 1024); print(len(x))'")
    assert result.is_error and "MemoryError" in result.text


async def test_cpu_time_beyond_the_limit_ends_the_process(box: Box) -> None:
    box.sandbox = replace(box.sandbox, limits=replace(box.sandbox.limits, cpu_seconds=1))
    result = await box.run("while :; do :; done")
    assert result.is_error and "timed out" not in result.text
    assert result.text.endswith(": CPU time limit exceeded]")


async def test_no_file_grows_past_the_file_size_limit(box: Box) -> None:
    box.sandbox = replace(box.sandbox, limits=replace(box.sandbox.limits, file_size=MiB))
    result = await box.run("head -c 3M /dev/zero > f; wc -c < f")
    assert "File size limit exceeded" in result.text and "1048576" in result.text


# many conversations and one hostile ---------------------------------------------------
async def test_twenty_conversations_run_while_one_forks_and_fills_the_disk(box: Box) -> None:
    token = CancellationToken()
    bomb = asyncio.create_task(box.run(BOMB, key=HOSTILE, token=token, timeout=60))
    filler = asyncio.create_task(box.run(PACED_FILLER, key=HOSTILE, timeout=60))
    await until_capped(box.group_of(HOSTILE))
    keys = [f"slack:C{i}:U{i}" for i in range(20)]
    results = await asyncio.gather(
        *(box.run(f"echo hello-{i} > note && cat note", key=k) for i, k in enumerate(keys))
    )
    filled = await asyncio.wait_for(filler, WAIT)
    await stop_hostile(token, bomb)
    assert [r.text for r in results] == [f"hello-{i}\n[exit code 0]" for i in range(20)]
    assert filled.is_error and "wrote-all" not in filled.text
    assert database_rows(box.database) == [("alice", "hello")]
    assert not box.group_of(HOSTILE).exists()


# configuration and the start-up probe -------------------------------------------------
def config_with(tmp_path: Path, profile: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[gateway]\ndata_dir = "data"\n\n[profiles.default]\n{profile}\n')
    return path


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("sandbox_processes = 0", "sandbox_processes: expected a positive integer, got 0"),
        ("sandbox_processes = 2", "sandbox_processes: expected at least 4"),
        (
            'sandbox_disk_quota_mb = "1G"',
            'sandbox_disk_quota_mb: expected a positive integer, got "1G"',
        ),
        ("sandbox_memory_mb = 16", "sandbox_memory_mb: expected at least 64"),
        ("sandbox_cpu_seconds = 1e3", "sandbox_cpu_seconds: expected a positive integer"),
        ("sandbox_file_size_mb = 99999999999", "sandbox_file_size_mb: expected at most"),
    ],
)
def test_a_bad_limit_is_one_readable_error(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(config_with(tmp_path, line), env={})
    text = str(error.value)
    assert f"profiles.default.{message}" in text and text.count("profiles.default.") == 1


def test_check_config_shows_the_default_limits(tmp_path: Path) -> None:
    shown = render_config(load_config(config_with(tmp_path, ""), env={}))
    for line in (
        "sandbox_processes = 256",
        "sandbox_memory_mb = 2048",
        "sandbox_cpu_seconds = 600",
        "sandbox_disk_quota_mb = 1024",
    ):
        assert line in shown


async def test_the_profile_limits_reach_the_sandbox(tmp_path: Path) -> None:
    config = load_config(config_with(tmp_path, "sandbox_disk_quota_mb = 50"), env={})
    sandbox = (await prepare_sandboxes(config))["default"]
    assert isinstance(sandbox, Bubblewrap) and sandbox.cgroups is not None
    assert sandbox.limits == Limits(disk_quota=50 * MiB)


async def test_the_start_says_once_what_it_cannot_enforce(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = config_with(tmp_path, "")
    source.write_text(source.read_text() + "\n[profiles.other]\n")
    config = load_config(source, env={})
    with caplog.at_level(logging.INFO, logger="gateway.turns.containment"):
        sandboxes = await prepare_sandboxes(config, cgroup_root=tmp_path / "no-cgroups")
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 1
    assert lines[0].startswith("sandbox limits not enforced here: the process cap")
    assert "RLIMIT_NPROC" in lines[0] and str(tmp_path / "no-cgroups") in lines[0]
    assert all(isinstance(s, Bubblewrap) and s.cgroups is None for s in sandboxes.values())


async def test_with_a_writable_pids_cgroup_the_start_warns_of_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = load_config(config_with(tmp_path, ""), env={})
    with caplog.at_level(logging.INFO, logger="gateway.turns.containment"):
        await prepare_sandboxes(config)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("256 processes (pids cgroup)" in r.getMessage() for r in caplog.records)


# the quota's scans, on an injected clock ----------------------------------------------
@dataclass
class WriterBetweenScans:
    """An injected sleep: each pause advances the test clock and writes ``per_second``
    bytes' worth of pause into the workspace, as a writer running meanwhile would."""

    workspace: Path
    per_second: int
    now: float = 0.0
    pauses: list[float] = field(default_factory=list)
    paused: asyncio.Event = field(default_factory=asyncio.Event)
    """Set at each pause (the test clears it to wait for the next)."""

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.paused.set()
        self.now += seconds
        written = int(self.per_second * seconds)
        if written:
            path = self.workspace / f"chunk{len(self.pauses)}"
            await asyncio.to_thread(path.write_bytes, b"\1" * written)

    def clock(self) -> float:
        return self.now


async def test_a_growing_workspace_is_scanned_sooner_as_it_nears_the_quota(
    tmp_path: Path,
) -> None:
    writer = WriterBetweenScans(tmp_path, per_second=40 * MiB)
    limits = Limits(disk_quota=QUOTA, scan_interval=0.1)
    watch = QuotaWatch(limits, tmp_path, 0, writer.sleep, writer.clock)
    note = await asyncio.wait_for(watch(), WAIT)
    assert note.startswith("[stopped: the workspace passed its disk quota of 16 MB (used ")
    assert watch.passed is not None and QUOTA < watch.passed < QUOTA + 2 * MiB
    assert max(writer.pauses) == 0.1 and writer.pauses[-1] < 0.05  # sooner as the room runs out


async def test_a_quiet_workspace_is_scanned_every_interval(tmp_path: Path) -> None:
    writer = WriterBetweenScans(tmp_path, per_second=0)
    watch = QuotaWatch(Limits(disk_quota=QUOTA, scan_interval=0.1), tmp_path, 0, writer.sleep)
    scanning = asyncio.create_task(watch())
    while len(writer.pauses) < 5:
        writer.paused.clear()
        await asyncio.wait_for(writer.paused.wait(), WAIT)
    scanning.cancel()
    assert writer.pauses[1:5] == [0.1] * 4


async def test_the_profile_disk_quota_reaches_write_file(tmp_path: Path) -> None:
    from gateway.wiring import _tools

    source = config_with(tmp_path, 'sandbox = "none"\nsandbox_disk_quota_mb = 1')
    registry = _tools(load_config(source, env={}), {})["default"]
    write_file = registry.get("write_file")
    assert write_file is not None
    ctx = ToolContext("test:dm:quota", "s", "t", "c", CancellationToken(), tmp_path)
    small = await write_file.handler({"path": "a", "content": "x" * 600_000}, ctx)
    big = await write_file.handler({"path": "b", "content": "x" * 600_000}, ctx)
    assert not small.is_error
    assert big.is_error and "disk quota of 1 MB" in big.text
