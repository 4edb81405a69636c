"""What one conversation's sandboxed commands may use: processes, memory, CPU, disk.

:class:`Limits` holds a profile's values (``sandbox_*`` keys, README "Tools and the
sandbox"). They are applied to every command the bubblewrap sandbox runs
(:mod:`core.tools.sandbox`, :mod:`core.tools.terminal`), per workspace — one conversation,
or the whole profile with ``workspace_scope = "profile"``:

* **processes**: a pids cgroup per workspace (:class:`PidsCgroups`, cgroup v1 or a
  delegated v2 subtree), shared by the workspace's running commands and removed when the
  last one ends; where none is writable, ``RLIMIT_NPROC`` (which the kernel does not apply
  to root — :func:`find_pids_cgroups` says why none was found, and the gateway says it
  once at start);
* **memory**: ``RLIMIT_AS`` — each process's address space;
* **CPU time**: ``RLIMIT_CPU`` — each process's CPU seconds (``SIGXCPU``, then killed);
* **file size**: ``RLIMIT_FSIZE`` — no file grows past ``file_size`` (default: the quota),
  nor past what is left of the quota when the command starts;
* **disk quota**: the workspace's usage (:func:`disk_usage`: allocated blocks, hard links
  once) is measured before each command, watched while it runs, and measured after. A
  command started over quota runs with ``RLIMIT_FSIZE`` 0 — it can read and delete, no
  file can grow — so the model can free space; one that passes the quota while running is
  stopped (its whole process group killed) and the model told.

The rlimits and the cgroup are set in the child between fork and exec of ``bwrap``
(:func:`preexec`: only system calls, no Python locks), so the sandbox and everything it
starts inherit them.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import os
import resource
import secrets
import signal
import stat
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

MiB = 1024 * 1024
GiB = 1024 * MiB

DEFAULT_PROCESSES = 256
DEFAULT_MEMORY = 2 * GiB
DEFAULT_CPU_SECONDS = 600
DEFAULT_DISK_QUOTA = 1 * GiB
DEFAULT_SCAN_INTERVAL = 0.1
MIN_SCAN_PAUSE = 0.005
SCAN_SHARE = 4.0
MIN_PROCESSES = 4
"""bubblewrap, its init and the shell: fewer and no command can start."""
MIN_MEMORY = 64 * MiB
"""Below this ``bwrap`` and ``/bin/sh`` cannot map their libraries."""

CGROUP_FS = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "commonos-"
RELEASE_SECONDS = 5.0
RELEASE_FIRST_PAUSE = 0.001
RELEASE_LONGEST_PAUSE = 0.05
CPU_GRACE_SECONDS = 5
"""Between ``SIGXCPU`` (the soft CPU limit) and ``SIGKILL`` (the hard one)."""

Rlimit = tuple[int, int, int]
"""``(resource, soft, hard)``."""


@dataclass(frozen=True, slots=True)
class Limits:
    """One profile's limits; bytes and seconds. ``file_size`` ``None``: the disk quota.
    ``scan_interval`` is how often a running command's workspace is measured."""

    processes: int = DEFAULT_PROCESSES
    memory: int = DEFAULT_MEMORY
    cpu_seconds: int = DEFAULT_CPU_SECONDS
    file_size: int | None = None
    disk_quota: int = DEFAULT_DISK_QUOTA
    scan_interval: float = DEFAULT_SCAN_INTERVAL

    def room(self, used: int) -> int:
        """The largest file a command may write when the workspace holds ``used`` bytes."""
        largest = self.disk_quota if self.file_size is None else self.file_size
        return max(min(largest, self.disk_quota - used), 0)

    def rlimits(self, used: int, *, nproc: bool) -> list[Rlimit]:
        """The rlimits of a command started with ``used`` bytes in its workspace;
        ``nproc``: cap processes by ``RLIMIT_NPROC`` (no pids cgroup)."""
        cpu_hard = self.cpu_seconds + CPU_GRACE_SECONDS
        room = self.room(used)
        chosen = [
            (resource.RLIMIT_AS, self.memory, self.memory),
            (resource.RLIMIT_CPU, self.cpu_seconds, cpu_hard),
            (resource.RLIMIT_FSIZE, room, room),
        ]
        if nproc:
            chosen.append((resource.RLIMIT_NPROC, self.processes, self.processes))
        return chosen


DEFAULT_LIMITS = Limits()


def preexec(rlimits: list[Rlimit], cgroup_procs: int | None) -> Callable[[], None]:
    """What the child does before it execs ``bwrap``: join the cgroup (``cgroup_procs``,
    an fd open on its :attr:`PidsCgroups.join_file`; "0" is the writer) and lower its
    rlimits."""

    def confine() -> None:
        if cgroup_procs is not None:
            os.write(cgroup_procs, b"0")
        for what, soft, hard in rlimits:
            resource.setrlimit(what, (soft, hard))

    return confine


# disk ---------------------------------------------------------------------------------
def disk_usage(root: Path) -> int:
    """Bytes the tree at ``root`` holds on disk (allocated blocks, so a sparse file counts
    what it uses; a hard-linked file once); symlinks are not followed."""
    seen: set[tuple[int, int]] = set()
    total, pending = 0, [str(root)]
    while pending:
        with contextlib.suppress(OSError), os.scandir(pending.pop()) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    info = entry.stat(follow_symlinks=False)
                    if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
                        if (info.st_dev, info.st_ino) in seen:
                            continue
                        seen.add((info.st_dev, info.st_ino))
                    total += info.st_blocks * 512
                    if stat.S_ISDIR(info.st_mode):
                        pending.append(entry.path)
    return total


def megabytes(size: int) -> str:
    """``52428800`` → ``"50 MB"``, ``52743372`` → ``"50.3 MB"`` (MB = 1,048,576 bytes)."""
    return f"{size / MiB:.1f}".removesuffix(".0") + " MB"


def over_quota_note(limits: Limits, before: int, after: int) -> str:
    """Told with a command that started over quota (so no file could grow)."""
    quota = megabytes(limits.disk_quota)
    if after < limits.disk_quota:
        return (
            f"[the workspace was over its disk quota of {quota} when this command started "
            f"(used {megabytes(before)}), so no file could grow; it now uses {megabytes(after)}]"
        )
    return (
        f"[the workspace is over its disk quota of {quota} (used {megabytes(after)}): "
        "files cannot grow; delete files to continue]"
    )


def stopped_note(limits: Limits, used: int) -> str:
    """Told with a command stopped for passing the quota."""
    return (
        f"[stopped: the workspace passed its disk quota of {megabytes(limits.disk_quota)} "
        f"(used {megabytes(used)}); delete files to continue]"
    )


def full_note(limits: Limits, used: int) -> str:
    """Told with a command that ended with the workspace at or over its quota."""
    return (
        f"[the workspace is full: disk quota {megabytes(limits.disk_quota)}, "
        f"used {megabytes(used)}; delete files to continue]"
    )


Sleep = Callable[[float], Awaitable[None]]


@dataclass(slots=True)
class QuotaWatch:
    """Measures a running command's workspace (which held ``used`` bytes at its start);
    awaited, it returns the note of the stop once the usage passes the quota — or ``used``,
    when that was higher. ``sleep`` and ``clock`` are injected in tests.

    Between scans it waits at most ``limits.scan_interval``; a workspace that grows is
    scanned sooner — when, at the rate seen, half of the room left would be gone (at least
    :data:`MIN_SCAN_PAUSE`) — so a fast writer is caught near the quota; and a big tree no
    more often than lets scanning take a fifth of the time (:data:`SCAN_SHARE`)."""

    limits: Limits
    workspace: Path
    used: int
    sleep: Sleep = asyncio.sleep
    clock: Callable[[], float] = time.monotonic
    passed: int | None = None

    async def __call__(self) -> str:
        ceiling = max(self.limits.disk_quota, self.used)
        before, then, pause = self.used, self.clock(), MIN_SCAN_PAUSE
        while True:
            await self.sleep(pause)
            begun = self.clock()
            used = await asyncio.to_thread(disk_usage, self.workspace)
            now = self.clock()
            if used > ceiling:
                self.passed = used
                return stopped_note(self.limits, used)
            rate = (used - before) / max(now - then, 1e-6)
            pause = self._pause(ceiling - used, rate, now - begun)
            before, then = used, now

    def _pause(self, room: int, rate: float, scan_seconds: float) -> float:
        longest = self.limits.scan_interval
        soon = longest if rate <= 0 else min(longest, room / rate / 2)
        return max(soon, MIN_SCAN_PAUSE, SCAN_SHARE * scan_seconds)


# processes ----------------------------------------------------------------------------
@dataclass(slots=True, eq=False)
class PidsCgroups:
    """Per-workspace pids cgroups under ``base`` (``<parent>/commonos-<pid>-<random>``),
    made on demand. ``unified``: cgroup v2, where ``base`` must enable the controller for
    its children. A workspace's cgroup lives while one of its commands runs."""

    base: Path
    unified: bool
    _leases: dict[Path, int] = field(default_factory=dict)

    @contextlib.asynccontextmanager
    async def joined(self, workspace: Path, processes: int) -> AsyncIterator[int]:
        """An fd on the workspace's :attr:`join_file` (for :func:`preexec`); on the way out
        the last lease kills what is left in the cgroup and removes it."""
        group = self.base / _group_name(workspace)
        self._acquire(group, processes)
        try:
            fd = os.open(group / self.join_file, os.O_WRONLY | os.O_CLOEXEC)
            try:
                yield fd
            finally:
                os.close(fd)
        finally:
            await self._release(group)

    @property
    def join_file(self) -> str:
        """What the child writes itself into. In v1, ``tasks``: moving one thread (the
        child has no other) skips the global lock that makes each ``cgroup.procs`` write
        wait for an RCU grace period (~10 ms a command, measured)."""
        return "cgroup.procs" if self.unified else "tasks"

    def path_of(self, workspace: Path) -> Path:
        """Where the workspace's cgroup is while a command of it runs."""
        return self.base / _group_name(workspace)

    def _acquire(self, group: Path, processes: int) -> None:
        if group not in self._leases:
            self._ensure_base()
            group.mkdir(exist_ok=True)
            (group / "pids.max").write_text(str(processes))
        self._leases[group] = self._leases.get(group, 0) + 1

    def _ensure_base(self) -> None:
        if self.base.is_dir():
            return
        self.base.mkdir()
        if self.unified:
            (self.base / "cgroup.subtree_control").write_text("+pids")

    async def _release(self, group: Path) -> None:
        self._leases[group] -= 1
        if self._leases[group]:
            return
        del self._leases[group]
        await remove_cgroup(group)
        if not self._leases:  # idle: leave nothing behind (made again on demand)
            _remove(self.base)


def _group_name(workspace: Path) -> str:
    """Readable, and distinct for distinct workspaces."""
    digest = hashlib.sha256(os.fsencode(workspace)).hexdigest()[:12]
    return f"{workspace.name[:40]}-{digest}"


async def remove_cgroup(group: Path) -> bool:
    """Kill what is left in ``group`` and remove it, trying for :data:`RELEASE_SECONDS`;
    False if it stays busy (the next command of its workspace reuses it). cgroupfs calls
    are in-kernel bookkeeping, not disk I/O: they run on the event loop."""
    loop = asyncio.get_running_loop()
    deadline, pause = loop.time() + RELEASE_SECONDS, RELEASE_FIRST_PAUSE
    while True:
        _kill_members(group)
        removed = _remove(group)
        if removed is not None:
            return removed
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(pause)  # killed members are still being reaped
        pause = min(pause * 2, RELEASE_LONGEST_PAUSE)


def _remove(group: Path) -> bool | None:
    """True: gone; False: cannot be removed; None: still busy."""
    try:
        group.rmdir()
    except FileNotFoundError:
        return True
    except OSError as exc:
        return None if exc.errno == errno.EBUSY else False
    return True


def _kill_members(group: Path) -> None:
    for pid in _members(group):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _members(group: Path) -> list[int]:
    try:
        return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def find_pids_cgroups(
    root: Path = CGROUP_FS, membership: Path = Path("/proc/self/cgroup")
) -> PidsCgroups | str:
    """Where this process may make pids cgroups for its commands — beneath its own cgroup
    (so any limit on the gateway still holds over them), in cgroup v1's ``pids``
    hierarchy or in a v2 tree that delegates ``pids`` — tried for real; else why not."""
    own = _own_cgroups(membership)
    candidates = []
    if "pids" in own:
        candidates.append((root / "pids" / own["pids"].lstrip("/"), False))
    if "" in own and "pids" in _read(root / "cgroup.controllers").split():
        candidates.append((root / own[""].lstrip("/"), True))
    if not candidates:
        return f"no pids cgroup controller under {root}"
    problems = []
    for parent, unified in candidates:
        found = _try_parent(parent, unified)
        if isinstance(found, PidsCgroups):
            return found
        problems.append(found)
    return "; ".join(problems)


def _own_cgroups(membership: Path) -> dict[str, str]:
    """``/proc/self/cgroup`` as controller → path ("" is the v2 tree)."""
    own: dict[str, str] = {}
    for line in _read(membership).splitlines():
        _, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        for name in controllers.split(",") if controllers else [""]:
            own[name] = path
    return own


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _try_parent(parent: Path, unified: bool) -> PidsCgroups | str:
    _remove_stale(parent)
    found = PidsCgroups(parent / f"{CGROUP_PREFIX}{os.getpid()}-{secrets.token_hex(3)}", unified)
    trial = found.base / "probe"
    try:
        if unified and "pids" not in _read(parent / "cgroup.subtree_control").split():
            (parent / "cgroup.subtree_control").write_text("+pids")
        found._ensure_base()
        trial.mkdir()
        (trial / "pids.max").write_text(str(MIN_PROCESSES))
    except OSError as exc:
        return f"cannot make a pids cgroup under {parent}: {exc.strerror or exc}"
    finally:
        for path in (trial, found.base):
            with contextlib.suppress(OSError):
                path.rmdir()
    return found


def _remove_stale(parent: Path) -> None:
    """Empty cgroups a gateway that is gone left behind (``commonos-<its pid>-…``)."""
    with contextlib.suppress(OSError):
        for base in parent.glob(f"{CGROUP_PREFIX}*"):
            pid = base.name.removeprefix(CGROUP_PREFIX).partition("-")[0]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                for path in [*base.iterdir(), base]:
                    with contextlib.suppress(OSError):
                        if path.is_dir():
                            path.rmdir()
