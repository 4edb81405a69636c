"""The SQLite connection under :class:`core.store.sqlite.SqliteStore`: opening the file, and
what its errors mean.

:func:`open_connection` refuses, without changing a byte, a file that is not SQLite, a
SQLite file that is not ours, and a store written by newer code; otherwise it makes the
file private (:mod:`core.store.files`), switches it to WAL with ``synchronous = NORMAL``,
turns foreign keys on, sets a busy timeout and applies pending migrations.
:func:`store_error` (and :func:`translated`, around the opening) turns every
``sqlite3.Error`` into a ``StoreError`` naming the file and what was being done, or its
subclass ``StoreUnavailable`` when storage cannot be written right now (disk full, read-only
file, I/O error, locked). The store runs its writes on the connection's thread itself
(:class:`core.store.sqlite.SqliteStore`).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiosqlite

from core.store.base import StoreError, StoreUnavailable
from core.store.files import private_database, private_dir
from core.store.migrations import apply_migrations, read_version, refuse_newer

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 5000
SQLITE_HEADER = b"SQLite format 3\x00"

_UNAVAILABLE = {
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_BUSY,
    sqlite3.SQLITE_LOCKED,
    sqlite3.SQLITE_CANTOPEN,
}
"""Primary result codes meaning "storage is not usable right now", not "bad data"."""


def store_error(path: Path, doing: str, exc: sqlite3.Error) -> StoreError:
    """``exc`` as ours: ``StoreUnavailable`` when storage cannot be written right now, else
    ``StoreError``; both name the file and what was being done. The store's statements
    catch ``sqlite3.Error`` themselves and raise this (no context manager per statement)."""
    unavailable = (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _UNAVAILABLE
    kind = StoreUnavailable if unavailable else StoreError
    return kind(f"{path}: cannot {doing}: {exc}")


@contextmanager
def translated(path: Path, doing: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        raise store_error(path, doing, exc) from exc


async def open_connection(path: Path) -> aiosqlite.Connection:
    """Open (creating it and its parent directories if missing) and migrate the store file;
    raises ``StoreError`` with the file named, leaving the file as it was, when it cannot be
    used (see the module's docstring)."""
    await asyncio.to_thread(_check_file, path)
    with translated(path, "open the store"):
        conn = await aiosqlite.connect(path, isolation_level=None)
    prepared = False
    try:
        await _prepare(conn, path)
        prepared = True
    finally:
        if not prepared:
            await conn.close()
    return conn


def _check_file(path: Path) -> None:
    """Refuse a file that is not SQLite before SQLite touches it; create the data
    directory and the file private (:mod:`core.store.files`), or make them private."""
    try:
        private_dir(path.parent)
        if not path.exists():
            private_database(path)
            return
        with path.open("rb") as file:
            head = file.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"cannot use {path} as the store file: {exc}") from exc
    if head and head != SQLITE_HEADER:
        raise StoreError(f"{path} is not a SQLite database")
    try:
        private_database(path)
    except OSError as exc:
        log.warning("cannot make %s private: %s", path, exc.strerror or exc)


async def _prepare(conn: aiosqlite.Connection, path: Path) -> None:
    conn.row_factory = sqlite3.Row
    with translated(path, "open the store"):
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        await conn.execute("PRAGMA foreign_keys = ON")
        version = await read_version(conn, path)  # reads only: the file is still untouched
        refuse_newer(path, version)
        await _enable_wal(conn, path)
        await apply_migrations(conn, version)


async def _enable_wal(conn: aiosqlite.Connection, path: Path) -> None:
    found = list(await conn.execute_fetchall("PRAGMA journal_mode = WAL"))
    if found[0][0] != "wal":
        log.warning("store %s stays in %s journal mode (WAL refused)", path, found[0][0])
        return
    await conn.execute("PRAGMA synchronous = NORMAL")
