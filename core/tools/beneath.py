"""Opening a regular file beneath a directory without following any symlink.

The file tools (:mod:`core.tools.files`) work in a directory that a sandboxed command of the
same conversation can change while they run: it may swap a directory for a symlink to
``/`` thousands of times a second. Resolving a path first and opening it afterwards loses
that race, so nothing here resolves a path as a whole. :func:`open_regular`:

1. takes the path apart lexically: ``.`` is dropped, ``..`` removes the component before it
   and may not climb above the workspace (``path '..' escapes the workspace``); an absolute
   path must lie inside the workspace (as configured or with its symlinks resolved) and is
   made relative to it;
2. opens the workspace directory, then each directory component with
   ``O_PATH | O_NOFOLLOW | O_DIRECTORY`` relative to the one before (``dir_fd``), so a
   component that is a symlink at the moment it is opened is refused, never followed;
   ``make_dirs`` creates a missing one with ``mkdir(dir_fd=...)`` and opens it the same way;
3. opens the last component relative to its parent with ``O_NOFOLLOW | O_NONBLOCK``
   (a FIFO without a reader or writer cannot block the opening thread), checks the open
   file with ``fstat`` and refuses anything that is not a regular file.

Every refusal is a :class:`BadPath` whose text is the one readable sentence the model
sees; which symlink it met and where it points is only looked at to word that sentence.
Symlinks are refused wherever they point (the file tools do not follow symlinks at all),
and ``..`` is collapsed by name, which is exact because no component is a symlink.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from pathlib import Path

_DIRECTORY = os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_FILE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_FILE_MODE = 0o644
_KIND_TESTS = {"a directory": stat.S_ISDIR, "a regular file": stat.S_ISREG}
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class BadPath(ValueError):
    """The path cannot be used (NUL byte, a symlink on the way, not a regular file, ...)."""


class PathEscape(BadPath):
    """The path leads outside the workspace."""


class WrongKind(BadPath):
    """A directory, FIFO, socket or device where a regular file is needed (or a file where
    a directory is)."""


class Missing(BadPath):
    """A component of the path does not exist (and was not to be created)."""


def open_regular(workspace: Path, path: str, flags: int, *, make_dirs: bool = False) -> int:
    """A descriptor of the regular file ``path`` beneath ``workspace``, opened with ``flags``
    (plus ``O_NOFOLLOW | O_NONBLOCK``); see the module docstring. The caller closes it."""
    *folders, name = parts(workspace, path) or ["."]
    parent = _open_workspace(workspace, path, make_dirs)
    try:
        for depth, folder in enumerate(folders):
            where = _Where(workspace, path, folders[: depth + 1])
            child = _step(parent, folder, where, make_dirs)
            os.close(parent)
            parent = child
        return _open_last(parent, name, _Where(workspace, path, [*folders, name]), flags)
    finally:
        os.close(parent)


def parts(workspace: Path, path: str) -> list[str]:
    """The components of ``path`` below ``workspace``, ``.`` and ``..`` taken out by name."""
    if "\x00" in path:
        raise BadPath(f"path {path!r} cannot be resolved: it holds a NUL byte")
    relative = _below(workspace, path) if os.path.isabs(path) else path
    kept: list[str] = []
    for part in relative.split("/"):
        if part == "..":
            if not kept:
                raise PathEscape(f"path {path!r} escapes the workspace")
            kept.pop()
        elif part not in ("", "."):
            kept.append(part)
    return kept


def _below(workspace: Path, path: str) -> str:
    """``path`` (absolute) relative to the workspace, as configured or resolved."""
    target = posixpath.normpath(path)
    for root in (posixpath.normpath(os.path.abspath(workspace)), os.path.realpath(workspace)):
        if target == root or target.startswith(root.rstrip("/") + "/"):
            return target[len(root) :]
    raise PathEscape(f"path {path!r} escapes the workspace")


class _Where:
    """Which component of which path is being opened: for the words of a refusal."""

    def __init__(self, workspace: Path, path: str, reached: list[str]) -> None:
        self.workspace, self.path = workspace, path
        self.shown = "/".join(reached)

    def symlink(self, dir_fd: int, name: str) -> BadPath:
        try:
            target = os.readlink(name, dir_fd=dir_fd)
        except OSError:
            target = ""
        if target and self._leaves(target):
            return PathEscape(
                f"path {self.path!r} escapes the workspace through the symlink "
                f"{self.shown!r}; the file tools do not follow symlinks"
            )
        return BadPath(
            f"path {self.path!r} cannot be resolved: {self.shown!r} is a symlink, "
            "and the file tools do not follow symlinks"
        )

    def _leaves(self, target: str) -> bool:
        start = posixpath.dirname(self.shown)
        joined = target if os.path.isabs(target) else posixpath.join(start, target)
        try:
            parts(self.workspace, joined)
        except PathEscape:
            return True
        return False

    def not_regular(self, mode: int) -> WrongKind:
        return self.not_("a regular file", mode)

    def not_(self, wanted: str, mode: int) -> WrongKind:
        kind = next((kind for test, kind in _KINDS if test(mode)), "a regular file")
        return WrongKind(f"{self.shown!r} is {kind}, not {wanted}")

    def missing(self) -> Missing:
        return Missing(f"{self.shown!r} does not exist")


def _open_workspace(workspace: Path, path: str, make_dirs: bool) -> int:
    try:
        return os.open(workspace, _DIRECTORY & ~os.O_NOFOLLOW)  # configured: may be a link
    except FileNotFoundError:
        if not make_dirs:
            raise Missing(f"the workspace of {path!r} does not exist") from None
    os.makedirs(workspace, mode=0o700, exist_ok=True)
    return os.open(workspace, _DIRECTORY & ~os.O_NOFOLLOW)


def _step(parent: int, name: str, where: _Where, make: bool) -> int:
    """Open directory ``name`` in ``parent``, creating it first if missing and ``make``."""
    try:
        return os.open(name, _DIRECTORY, dir_fd=parent)
    except FileNotFoundError:
        if not make:
            raise where.missing() from None
    except NotADirectoryError:
        raise _refusal(parent, name, where, wanted="a directory") from None
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, dir_fd=parent)
    return _step(parent, name, where, make=False)


def _open_last(parent: int, name: str, where: _Where, flags: int) -> int:
    """Open the last component: a regular file or a clear refusal, never a wait."""
    _refuse_special(parent, name, where)
    try:
        fd = os.open(name, flags | _FILE, _FILE_MODE, dir_fd=parent)
    except FileNotFoundError:
        raise where.missing() from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENOTDIR):
            raise _refusal(parent, name, where) from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise where.not_regular(mode)
    return fd


def _refuse_special(parent: int, name: str, where: _Where) -> None:
    """Refuse before opening what is already known not to be a plain file (no side effects
    of opening a device); the ``fstat`` after the open catches a swap in between."""
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise where.symlink(parent, name)
    if not stat.S_ISREG(mode):
        raise where.not_regular(mode)


def _refusal(parent: int, name: str, where: _Where, wanted: str = "a regular file") -> BadPath:
    """Why ``name`` could not be opened as ``wanted``: a symlink, another kind, or gone."""
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return where.missing()
    if stat.S_ISLNK(mode):
        return where.symlink(parent, name)
    if _KIND_TESTS[wanted](mode):  # it was swapped back in between: what was opened is gone
        return BadPath(f"{where.shown!r} changed while it was being opened; try again")
    return where.not_(wanted, mode)
