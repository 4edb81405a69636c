"""Saving a user's file into a session's workspace, under ``inbox/``, and nowhere else.

The workspace is shared with the sandboxed terminal of the same conversation, so the model
may have replaced ``inbox`` with a symlink (to ``/``, to the data directory) or may swap
it while a download runs. Nothing here resolves a path and opens it later (the technique of
:mod:`core.tools.beneath`, whose flags it uses):

* :class:`Inbox` opens the workspace, then ``inbox`` in it with
  ``O_PATH | O_NOFOLLOW | O_DIRECTORY`` (creating it first when missing): a symlink there is
  refused (:class:`~core.tools.beneath.BadPath`), never followed. Every later step is
  relative to that descriptor (``dir_fd``), so renaming ``inbox`` meanwhile changes nothing.
* a download is written to ``inbox/.partial-<id>`` (opened ``O_NOFOLLOW``, truncated: what a
  crash left of the same file is discarded), then published under its safe name with
  ``link`` — which never replaces an existing file, so the first free name of ``name``,
  ``name-2``, ``name-3``… is taken without a race — and the partial name removed.

:func:`safe_name` neutralises the sender's file name (docs/attachments.md, "Names").
:class:`DownloadDeadline` is how long one download may take in all.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import mimetypes
import os
import re
import stat
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from core.tools.beneath import BadPath
from gateway.config.sections import DEFAULT_DOWNLOAD_RATE, DEFAULT_DOWNLOAD_SECONDS

INBOX = "inbox"
PARTIAL = ".partial-"
MAX_NAME = 120
"""Characters of a saved name (its extension kept)."""
MAX_NAME_BYTES = 200
"""UTF-8 bytes of a saved name: below every file system's 255, with room for ``-N``."""
MAX_EXTENSION = 16
MAX_SUFFIX = 1000
_DIRECTORY = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
_PARTIAL_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
_FORBIDDEN = set('/\\<>:"|?*')
_DROPPED_CATEGORIES = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
"""Control, format (the bidi overrides U+202E…, zero-width), surrogate, private, unassigned
and line/paragraph separators: none of them belongs in a file name."""
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"{p}{n}" for p in ("COM", "LPT") for n in range(10))}


@dataclass(frozen=True, slots=True)
class DownloadDeadline:
    """The total time one download may take, besides each read's own timeout: a server
    that trickles a byte every few seconds passes every read timeout and would keep the
    chat's lane busy for good. ``max(min_seconds, size / min_rate)``, ``size`` the
    declared size (the size limit when none is declared)."""

    min_seconds: float = DEFAULT_DOWNLOAD_SECONDS
    min_rate: float = DEFAULT_DOWNLOAD_RATE

    def seconds(self, size: int) -> float:
        return max(self.min_seconds, size / self.min_rate)


def safe_name(name: str, mime: str = "") -> str:
    """``name`` as a single harmless file name: no ``/``, ``\\``, ``..``, NUL, control or
    bidi characters, no leading dot, not a Windows device name, at most :data:`MAX_NAME`
    characters with its extension kept (the MIME type's when it has none); ``file`` when
    nothing is left."""
    kept = "".join(_character(c) for c in unicodedata.normalize("NFC", name))
    kept = re.sub(r"\.{2,}", ".", " ".join(kept.split())).strip(" .")
    stem, extension = _split(kept)
    stem, extension = stem or "file", extension or _extension_of(mime)
    if stem.split(".", 1)[0].upper() in _RESERVED:
        stem = f"_{stem}"
    return _shortened(stem, extension)


def _character(char: str) -> str:
    if char in _FORBIDDEN:
        return "_"
    category = unicodedata.category(char)
    if category in _DROPPED_CATEGORIES:
        return " " if category in ("Zl", "Zp") else ""
    return " " if category.startswith("Z") else char


def _split(name: str) -> tuple[str, str]:
    stem, dot, extension = name.rpartition(".")
    if not dot or not stem or not extension or len(extension) > MAX_EXTENSION:
        return name, ""
    return stem.rstrip(" ."), "." + extension.strip()


def _extension_of(mime: str) -> str:
    if not mime:
        return ""
    return mimetypes.guess_extension(mime.split(";", 1)[0].strip()) or ""


def _shortened(stem: str, extension: str) -> str:
    room = MAX_NAME - len(extension)
    stem = stem[:room].rstrip(" .") or "file"
    while len((stem + extension).encode()) > MAX_NAME_BYTES:
        stem = stem[:-1].rstrip(" .") or "f"
    return stem + extension


def candidates(name: str) -> Iterator[str]:
    """``name``, then ``stem-2.ext``, ``stem-3.ext``… up to :data:`MAX_SUFFIX`."""
    yield name
    stem, extension = _split(name)
    for number in range(2, MAX_SUFFIX + 1):
        yield f"{stem}-{number}{extension}"


def partial_name(origin: str, index: int) -> str:
    """The partial file of one attachment: the same on a replay, so a crash's leftover is
    overwritten, never kept beside the new one."""
    digest = hashlib.sha256(f"{origin}\x00{index}".encode()).hexdigest()[:20]
    return f"{PARTIAL}{digest}"


class Inbox:
    """The open ``inbox`` directory of one workspace (a context manager: closes it)."""

    def __init__(self, workspace: Path) -> None:
        self.fd = _open_inbox(workspace)

    def __enter__(self) -> Inbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        os.close(self.fd)

    def open_partial(self, name: str) -> int:
        """A write descriptor of ``name`` (a partial file), emptied; refuses a symlink."""
        try:
            return os.open(name, _PARTIAL_FLAGS, 0o644, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                raise BadPath(f"{INBOX}/{name} is not a regular file") from None
            raise

    def publish(self, partial: str, name: str) -> str:
        """Give the partial file the first free name among :func:`candidates` of ``name``;
        returns the name it got."""
        for candidate in candidates(name):
            try:
                os.link(partial, candidate, src_dir_fd=self.fd, dst_dir_fd=self.fd,
                        follow_symlinks=False)  # fmt: skip
            except FileExistsError:
                continue
            self.discard(partial)
            return candidate
        raise BadPath(f"{MAX_SUFFIX} files named like {name!r} are already in {INBOX}/")

    def open_saved(self, name: str) -> int:
        """A read descriptor of the saved file ``name``; refuses a symlink or a special file."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=self.fd)  # fmt: skip
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOENT):
                raise BadPath(f"{INBOX}/{name} is gone or was replaced by a symlink") from None
            raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise BadPath(f"{INBOX}/{name} is not a regular file")
        return fd

    def discard(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def holds(self, name: str, size: int) -> bool:
        """``name`` is a regular file of ``size`` bytes here (not a symlink)."""
        try:
            found = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except OSError:
            return False
        return stat.S_ISREG(found.st_mode) and found.st_size == size


def _open_inbox(workspace: Path) -> int:
    root = os.open(workspace, _DIRECTORY)  # configured: the workspace itself may be a link
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(INBOX, 0o700, dir_fd=root)
        try:
            return os.open(INBOX, _DIRECTORY | os.O_NOFOLLOW, dir_fd=root)
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                raise BadPath(_not_a_directory(root)) from None
            raise
    finally:
        os.close(root)


def _not_a_directory(root: int) -> str:
    mode = os.stat(INBOX, dir_fd=root, follow_symlinks=False).st_mode
    if stat.S_ISLNK(mode):
        return f"{INBOX}/ in the workspace is a symlink, and files are never saved through one"
    return f"{INBOX} in the workspace is not a directory"


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` (``os.write`` may write fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
