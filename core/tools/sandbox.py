"""Where a shell command runs: the session's workspace, inside a bubblewrap sandbox.

**Workspaces.** :class:`Workspaces` gives every session its own directory under a profile's
workspace root (``<root>/<session key made filesystem-safe>``), or one directory shared by
the whole profile (``scope="profile"``). A child agent's session (``<key>/child:…``) works in
its parent's workspace. The terminal, ``read_file`` and ``write_file`` use the same one.

**The sandbox** (:class:`Bubblewrap`) runs ``/bin/sh -c <command>`` under ``bwrap`` and
exposes exactly :data:`SYSTEM_PATHS` read-only, minus :data:`SYSTEM_SECRETS` and the
configured ``hidden`` paths (the data directory, the config file), plus:

* the session's workspace, read-write, at its real path (also the working directory and
  ``HOME``); nothing else of the host's file tree — no other workspace, no database; the
  rest of the tree is read-only (only the workspace and ``/tmp`` can be written);
* a private ``/proc`` (new PID namespace: the gateway's processes and their environments
  are not there), a minimal ``/dev``, and an empty ``/tmp``;
* an environment built from scratch: :func:`sandbox_environment` (``PATH``, ``HOME``,
  ``TMPDIR``, ``TERM``, ``LANG``/``LC_*``, ``TZ``) — the gateway's own never reaches it;
* no network unless the profile allows it (``--unshare-net``; loopback only, and its own);
* new user, IPC, UTS and cgroup namespaces; every capability dropped; its own session
  (``--new-session``: no terminal injection); killed with the gateway (``--die-with-parent``);
* the profile's :class:`~core.tools.limits.Limits` (processes, memory, CPU time, file size,
  the workspace's disk quota; :mod:`core.tools.limits`), and a ``/tmp`` no larger than the
  disk quota (``--size``; where bubblewrap is older than 0.7, ``/tmp`` is uncapped and the
  probe says so). Processes are capped by :class:`~core.tools.limits.PidsCgroups` when
  the probe found a writable pids cgroup, else by ``RLIMIT_NPROC``.

:class:`NoSandbox` is the explicit opt-out (profile ``sandbox = "none"``): the host shell,
with secret-looking variables dropped from the environment. :class:`Unavailable` stands
for a bubblewrap sandbox that cannot run here; a terminal given one refuses every command
and says why. :func:`probe` finds out which of the two applies.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core.tools.limits import DEFAULT_LIMITS, Limits, PidsCgroups

WorkspaceScope = Literal["session", "profile"]
SandboxKind = Literal["bwrap", "none"]

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
"""Host paths the sandbox sees read-only (symlinks, as on merged-/usr systems, stay links)."""

SYSTEM_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
)
"""Paths under :data:`SYSTEM_PATHS` the sandbox never sees (masked when they exist)."""

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PASSED_VARIABLES = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ")
"""The only host variables that reach a sandboxed command (besides those set for it)."""

SECRET_NAME_PARTS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
PROBE_SECONDS = 10.0
NO_BWRAP = "bubblewrap (bwrap) is not installed"
NO_TMP_CAP = "/tmp cannot be capped (bubblewrap older than 0.7 has no --size)"

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_NAME = 80


def workspace_name(session_key: str) -> str:
    """A directory name for ``session_key``: readable, and distinct for distinct keys."""
    readable = _UNSAFE.sub("_", session_key).strip("._")[:_MAX_NAME] or "session"
    digest = hashlib.sha256(session_key.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{readable}-{digest}"


@dataclass(frozen=True, slots=True)
class Workspaces:
    """A profile's workspace root and how it is shared (see the module docstring)."""

    root: Path
    scope: WorkspaceScope = "session"

    def path_for(self, session_key: str) -> Path:
        if self.scope == "profile":
            return self.root
        parent = session_key.partition("/child:")[0]
        return self.root / workspace_name(parent)

    def ensure(self, session_key: str) -> Path:
        """The session's workspace, created (owner-only) if missing."""
        path = self.path_for(session_key)
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path


@dataclass(frozen=True, slots=True)
class Launch:
    """How to start one command: the argv and the whole environment of the process;
    ``preexec`` runs in the child before it execs (:func:`core.tools.limits.preexec`)."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    preexec: Callable[[], None] | None = None


@dataclass(frozen=True, slots=True)
class Bubblewrap:
    """The bubblewrap sandbox; ``executable`` is the absolute path of ``bwrap``.
    ``cgroups``: where processes are capped (``None``: by ``RLIMIT_NPROC``);
    ``cap_tmp``: ``/tmp`` is a tmpfs no larger than the disk quota; ``read_only``:
    ``(host path, path inside)`` pairs mounted read-only (the profile's skills,
    :func:`core.skills.tool.skill_mounts`)."""

    executable: str
    network: bool = False
    hidden: tuple[Path, ...] = ()
    limits: Limits = DEFAULT_LIMITS
    cgroups: PidsCgroups | None = None
    cap_tmp: bool = True
    read_only: tuple[tuple[Path, str], ...] = ()

    def launch(self, command: str, workspace: Path) -> Launch:
        argv = [self.executable, *self.arguments(workspace), "/bin/sh", "-c", command]
        return Launch(argv, sandbox_environment(workspace), "/")

    def arguments(self, workspace: Path) -> list[str]:
        """The ``bwrap`` options (before the command) for a command in ``workspace``."""
        args = [*_system_mounts(), "--dev", "/dev", "--proc", "/proc"]
        if self.cap_tmp:
            args += ["--size", str(self.limits.disk_quota)]
        args += ["--tmpfs", "/tmp"]
        hidden = (*_existing(SYSTEM_SECRETS), *self.hidden)
        inside = [p for p in hidden if p.is_relative_to(workspace)]
        for path in (p for p in hidden if p not in inside):  # may hold the workspace: first
            args += _mask(path, SYSTEM_PATHS)
        args += ["--bind", str(workspace), str(workspace), "--chdir", str(workspace)]
        for path in inside:
            args += _mask(path, (str(workspace),))
        for source, inside_path in self.read_only:
            args += ["--ro-bind", str(source), inside_path]
        args += ["--remount-ro", "/"]  # the skeleton bwrap built around the mounts, too
        args += ["--unshare-all", *([] if not self.network else ["--share-net"])]
        args += ["--cap-drop", "ALL", "--die-with-parent", "--new-session", "--clearenv"]
        for name, value in sandbox_environment(workspace).items():
            args += ["--setenv", name, value]
        return [*args, "--"]


@dataclass(frozen=True, slots=True)
class NoSandbox:
    """The host shell, as the gateway's user (profile ``sandbox = "none"``)."""

    def launch(self, command: str, workspace: Path) -> Launch:
        return Launch(["/bin/sh", "-c", command], _host_environment(), str(workspace))


@dataclass(frozen=True, slots=True)
class Unavailable:
    """A sandbox was asked for but cannot run here; ``reason`` says why, in one line."""

    reason: str


Sandbox = Bubblewrap | NoSandbox | Unavailable


def sandbox_environment(workspace: Path, host: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a sandboxed command (nothing else of the host's)."""
    host = os.environ if host is None else host
    env = {name: host[name] for name in PASSED_VARIABLES if name in host}
    return {
        **env,
        "PATH": SANDBOX_PATH,
        "HOME": str(workspace),
        "TMPDIR": "/tmp",
        "TERM": "dumb",
    }


def _host_environment() -> dict[str, str]:
    return {
        name: value
        for name, value in os.environ.items()
        if not any(part in name.upper() for part in SECRET_NAME_PARTS)
    }


def _system_mounts() -> list[str]:
    args: list[str] = []
    for name in SYSTEM_PATHS:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    return args


def _existing(paths: Sequence[str]) -> list[Path]:
    return [Path(p) for p in paths if os.path.lexists(p)]


def _mask(path: Path, visible: Sequence[str]) -> list[str]:
    """Hide ``path`` when it lies under a ``visible`` tree (anything else is not in the
    sandbox at all): an empty tmpfs over a directory, an empty file over anything else."""
    if not any(path.is_relative_to(p) for p in visible) or not os.path.lexists(path):
        return []
    return ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", os.devnull, str(path)]


async def probe(
    executable: str = "bwrap",
    *,
    network: bool = False,
    hidden: Sequence[Path] = (),
    limits: Limits = DEFAULT_LIMITS,
    cgroups: PidsCgroups | None = None,
) -> Bubblewrap | Unavailable:
    """A :class:`Bubblewrap` that was seen to run ``true``, or why it cannot run here.
    One whose ``bwrap`` is too old to cap ``/tmp`` comes back with ``cap_tmp`` False."""
    found = await asyncio.to_thread(_locate, executable)
    if found is None:
        return Unavailable(NO_BWRAP)
    sandbox = Bubblewrap(found, network, tuple(hidden), limits, cgroups)
    problem = await _try(sandbox)
    if problem is not None and "--size" in problem:
        sandbox = dataclasses.replace(sandbox, cap_tmp=False)
        problem = await _try(sandbox)
    return sandbox if problem is None else Unavailable(f"bubblewrap (bwrap) cannot run: {problem}")


def _locate(executable: str) -> str | None:
    found = shutil.which(executable)
    return None if found is None else os.path.abspath(found)


async def _try(sandbox: Bubblewrap) -> str | None:
    with tempfile.TemporaryDirectory(prefix="commonos-probe-") as scratch:
        launch = sandbox.launch("true", Path(scratch))
        try:
            proc = await asyncio.create_subprocess_exec(
                *launch.argv, env=launch.env, cwd=launch.cwd,
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            _, err = await asyncio.wait_for(proc.communicate(), PROBE_SECONDS)
        except (OSError, TimeoutError) as exc:
            return str(exc) or type(exc).__name__
    if proc.returncode == 0:
        return None
    lines = err.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else f"exit code {proc.returncode}"
