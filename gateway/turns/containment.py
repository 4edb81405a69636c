"""What keeps the tools away from the gateway's secrets, decided once at start.

* :func:`protect_process` makes the gateway process non-dumpable
  (``prctl(PR_SET_DUMPABLE, 0)``): other processes of the same user can no longer read its
  environment or memory through ``/proc/<pid>/`` (nor attach a debugger to it).
* :func:`prepare_sandboxes` chooses each profile's terminal sandbox
  (:mod:`core.tools.sandbox`): ``sandbox = "bwrap"`` is probed by running ``true`` in it, and
  when bubblewrap is missing or cannot run, one log line says so and that profile's terminal
  refuses every command (it never falls back to the host shell); ``sandbox = "none"`` is
  honoured with a warning. The data directory and the config file are hidden from it.
  Each sandbox carries its profile's limits (``sandbox_*`` keys, :mod:`core.tools.limits`);
  where a pids cgroup can be made for the commands is found once, and what this machine
  cannot enforce (the process cap without a writable pids cgroup, a ``/tmp`` size cap with
  an old bubblewrap) is said once, in one warning line.
* :func:`profile_workspaces` is where each profile's sessions work.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from core.tools.limits import CGROUP_FS, Limits, PidsCgroups, find_pids_cgroups, megabytes
from core.tools.sandbox import (
    NO_BWRAP,
    NO_TMP_CAP,
    Bubblewrap,
    NoSandbox,
    Sandbox,
    Unavailable,
    Workspaces,
    probe,
)
from gateway.config import Config, ProfileSection

log = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)"


def protect_process() -> bool:
    """Make this process non-dumpable; False (and a warning) when the OS refuses."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        failed = libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0
    except (OSError, AttributeError) as exc:
        log.warning("cannot make the process non-dumpable: %s", exc)
        return False
    if failed:
        log.warning("cannot make the process non-dumpable: errno %d", ctypes.get_errno())
    return not failed


def hidden_paths(config: Config) -> tuple[Path, ...]:
    """What no sandboxed command may see: the data directory and the config file."""
    paths = [config.gateway.data_dir]
    if config.source is not None:
        paths.append(config.source)
    return tuple(p.resolve() for p in paths)


def profile_workspaces(profile: ProfileSection) -> Workspaces:
    return Workspaces(profile.workspace, profile.workspace_scope)


async def prepare_sandboxes(
    config: Config, executable: str = "bwrap", cgroup_root: Path = CGROUP_FS
) -> dict[str, Sandbox]:
    """Each profile's sandbox, probed; problems logged, one line each. ``cgroup_root``:
    where the cgroup filesystems are mounted (tests point it elsewhere)."""
    hidden = hidden_paths(config)
    wanted = any(profile.sandbox == "bwrap" for profile in config.profiles.values())
    cgroups = await asyncio.to_thread(find_pids_cgroups, cgroup_root) if wanted else None
    chosen: dict[str, Sandbox] = {}
    for name, profile in config.profiles.items():
        found = cgroups if isinstance(cgroups, PidsCgroups) else None
        chosen[name] = await _prepare(profile, hidden, executable, found)
    line = unenforced_line(cgroups, chosen.values())
    if line is not None:
        log.warning("%s", line)
    return chosen


async def _prepare(
    profile: ProfileSection,
    hidden: tuple[Path, ...],
    executable: str,
    cgroups: PidsCgroups | None,
) -> Sandbox:
    if profile.sandbox == "none":
        log.warning(
            'profile %s: sandbox = "none": terminal commands run on the host, unsandboxed, '
            "as the gateway's user",
            profile.name,
        )
        return NoSandbox()
    limits = profile.sandbox_limits()
    found = await probe(
        executable, network=profile.sandbox_network, hidden=hidden, limits=limits, cgroups=cgroups
    )
    if isinstance(found, Unavailable):
        log.error("%s", refusal_line(profile.name, found))
    else:
        net = "with network" if found.network else "no network"
        log.info(
            "profile %s: terminal sandboxed by bubblewrap (%s; %s)",
            profile.name,
            net,
            limits_text(limits, found.cgroups is not None),
        )
    return found


def limits_text(limits: Limits, cgroup: bool) -> str:
    """The limits in a few words, for the start-up line."""
    by = "pids cgroup" if cgroup else "RLIMIT_NPROC"
    size = megabytes(limits.disk_quota if limits.file_size is None else limits.file_size)
    return (
        f"{limits.processes} processes ({by}), {megabytes(limits.memory)} memory, "
        f"{limits.cpu_seconds} s CPU, {size} files, {megabytes(limits.disk_quota)} disk quota"
    )


def unenforced_line(cgroups: PidsCgroups | str | None, sandboxes: Iterable[Sandbox]) -> str | None:
    """The one line saying which sandbox limits this machine cannot enforce (None: all can).
    ``cgroups`` is what :func:`~core.tools.limits.find_pids_cgroups` found, or why not."""
    bwraps = [s for s in sandboxes if isinstance(s, Bubblewrap)]
    gaps = []
    if bwraps and isinstance(cgroups, str):
        fallback = "RLIMIT_NPROC, which does not bind root" if os.geteuid() == 0 else "RLIMIT_NPROC"
        gaps.append(
            f"the process cap: {cgroups} (falling back to {fallback}; give the gateway a "
            "writable pids cgroup: cgroup v1 pids, or a delegated v2 subtree)"
        )
    if any(not s.cap_tmp for s in bwraps):
        gaps.append(f"{NO_TMP_CAP} (install bubblewrap 0.7 or newer)")
    return f"sandbox limits not enforced here: {'; '.join(gaps)}" if gaps else None


def refusal_line(profile: str, sandbox: Unavailable) -> str:
    """The one start-up line for a profile whose sandbox cannot run."""
    return (
        f"profile {profile}: {sandbox.reason} — the terminal tool will refuse to run commands; "
        f'{INSTALL_HINT}, or set sandbox = "none" in [profiles.{profile}]'
    )


def unprobed_sandboxes(config: Config) -> dict[str, Sandbox]:
    """Each profile's sandbox without running it (for a service composed without
    :func:`prepare_sandboxes`); still never the host shell unless the profile says so."""
    hidden, found = hidden_paths(config), shutil.which("bwrap")
    return {name: _unprobed(p, hidden, found) for name, p in config.profiles.items()}


def _unprobed(profile: ProfileSection, hidden: tuple[Path, ...], found: str | None) -> Sandbox:
    if profile.sandbox == "none":
        return NoSandbox()
    if found is None:
        return Unavailable(NO_BWRAP)
    return Bubblewrap(found, profile.sandbox_network, hidden, profile.sandbox_limits())
