"""The store's files are private to the gateway's user.

The data directory is created ``0700`` and the database ``0600`` (SQLite gives its
``-wal`` and ``-shm`` files the database's mode); an existing directory or file readable
by others is tightened, with one log line saying what changed. Conversation history is
never readable by every local user.
"""

from __future__ import annotations

import fcntl
import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
COMPANIONS = ("-wal", "-shm", "-journal")


def private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) with the leaf ``0700``; tighten it if wider."""
    if not path.exists():
        path.mkdir(parents=True, mode=PRIVATE_DIR)
        path.chmod(PRIVATE_DIR)  # mkdir's mode is filtered by the umask
        return
    _tighten(path, PRIVATE_DIR)


def private_database(path: Path) -> None:
    """Create the database file ``0600`` when missing; tighten it and its companions."""
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE))
        path.chmod(PRIVATE_FILE)
    for file in (path, *(path.with_name(path.name + suffix) for suffix in COMPANIONS)):
        if file.exists():
            _tighten(file, PRIVATE_FILE)


def _tighten(path: Path, mode: int) -> None:
    current = stat.S_IMODE(path.stat().st_mode)
    if current & ~mode:
        path.chmod(current & mode)
        log.warning(
            "tightened %s from %o to %o: it was open to other users", path, current, current & mode
        )


class StoreFileInUse(Exception):
    """Another process holds the SQLite store file's lock."""


class StoreFileLock:
    """One gateway process per SQLite store file: an exclusive ``flock`` on ``<db>.lock``
    beside it (released by the kernel if the process dies), so a second ``commonos run``
    or ``commonos chat`` on the same file cannot mistake the first one's running turns for
    a crash's leftovers. A PostgreSQL store takes no such lock: several processes share it
    (docs/cluster.md), and a data directory may be shared too."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self.path = db_path.with_name(db_path.name + ".lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock; :class:`StoreFileInUse` names the holder's pid when it is taken."""
        private_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise StoreFileInUse(
                f"another commonos process (pid {holder}) is using {self.db_path}; stop it first"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
