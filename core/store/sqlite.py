"""The ``Store`` on one SQLite file, through aiosqlite.

Opening (:func:`open_store`) refuses, without changing a byte, a file that is not SQLite,
a SQLite file that is not ours, and a store written by newer code; otherwise it switches
the file to WAL, turns foreign keys on, sets a busy timeout and applies pending migrations.

**Durability: WAL with ``synchronous = NORMAL``.** A commit is written to the WAL file but
not fsynced; the WAL is fsynced at each checkpoint. Every committed write survives the
*process* dying (kill -9, a crash, an OOM kill): the data is in the OS page cache and the
WAL is replayed on the next open. Only a power loss or kernel crash can lose the last
commits before the latest checkpoint — never corrupt the file. The inbox and outbox
guarantees (an update stored before it is confirmed; a chunk stored before it is sent)
therefore hold across process crashes; after a power loss, an update may come again from
the platform (it is then taken in again) and a reply may be sent once more. ``FULL`` would
fsync on every commit, the largest cost of a message on the hot path.

How the contract of :mod:`core.store.base` is kept:

* **One writer.** Every writing method takes ``_write_lock`` and runs exactly one SQL
  statement on a connection in autocommit mode, so each write is its own transaction,
  committed before the method returns. A caller cancelled while waiting does not undo its
  write: once queued, the statement runs whole (and is never half-applied).
* **Reads never see a half-written turn.** Readers share the same connection, whose single
  worker thread runs one statement at a time; a statement is atomic, so a reader sees the
  state before or after a write, never inside one. No write spans several statements, so
  there is no open transaction for a reader to peek into, and nothing is ever rolled back
  behind a reader's back. Another process reading the file gets WAL snapshot isolation.
* **Compare-and-set** (``resolve_approval``) is ``UPDATE ... WHERE state = 'pending'``;
  **idempotent enqueue** is ``INSERT ... ON CONFLICT DO NOTHING``; both report the row
  count.

The SQL and the row mapping of each table group live beside this module, as values
(:mod:`core.store.statements`); this one holds the connection, runs them and translates
errors. Every text parameter is made encodable first (:func:`~core.store.statements.storable`):
a lone surrogate is stored as U+FFFD instead of failing the write.

Foreign errors stop here: every ``sqlite3.Error`` leaves as a ``StoreError`` naming the file
and what was being done; one that means storage cannot be written right now (disk full,
read-only file, I/O error, locked) leaves as its subclass ``StoreUnavailable``. After
:meth:`SqliteStore.close` every operation raises ``StoreError``.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import aiosqlite

from core.store import attachments, outbox, platforms, sessions, tool_calls
from core.store.base import (
    ApprovalCard,
    ApprovalRecord,
    AttachmentRecord,
    DeadLetter,
    InboundRecord,
    InboundState,
    OutboxChunk,
    QueuedFile,
    SessionRecord,
    Store,
    StoredMessage,
    StoreError,
    StoreUnavailable,
    ToolCallRecord,
    ToolCallStatus,
    TurnRecord,
)
from core.store.files import private_database, private_dir
from core.store.migrations import apply_migrations, read_version, refuse_newer
from core.store.statements import storable
from core.types import ApprovalState, ChatMessage, Content, ExitReason, TurnStatus

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 5000
SQLITE_HEADER = b"SQLite format 3\x00"

Params = Sequence[object]

_UNAVAILABLE = {
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_BUSY,
    sqlite3.SQLITE_LOCKED,
    sqlite3.SQLITE_CANTOPEN,
}
"""Primary result codes meaning "storage is not usable right now", not "bad data"."""


class _Written(NamedTuple):
    rowcount: int
    lastrowid: int | None


class SqliteStore:
    """SQLite implementation of :class:`core.store.base.Store`. Create with ``open_store``."""

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        self._conn = conn
        self._path = path
        self._write_lock = asyncio.Lock()
        self._closed = False

    @property
    def path(self) -> Path:
        return self._path

    async def close(self) -> None:
        """Close the file once queued writes are done; later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        async with self._write_lock:
            await self._conn.close()

    # sessions, messages, turns (statements in core/store/sessions.py) ----------------
    async def get_active_session(self, key: str) -> SessionRecord | None:
        found = await self._read(sessions.ACTIVE_SESSION, (key,))
        return sessions.session_from_row(found[0]) if found else None

    async def create_session(self, key: str, profile: str) -> SessionRecord:
        now = time.time()
        record = SessionRecord(uuid.uuid4().hex, key, profile, now, now)
        await self._write(*sessions.create_session(record))
        return record

    async def end_session(self, session_id: str) -> None:
        await self._update_one(*sessions.end_session(session_id, time.time()))

    async def touch_session(self, session_id: str) -> None:
        await self._update_one(*sessions.touch_session(session_id, time.time()))

    async def save_session_prompt(
        self, session_id: str, *, frozen_context: str, system_prompt: str, fingerprint: str
    ) -> None:
        prompt = sessions.save_session_prompt(
            session_id, frozen_context, system_prompt, fingerprint
        )
        await self._update_one(*prompt)

    async def load_active_messages(self, session_id: str) -> list[StoredMessage]:
        found = await self._read(sessions.ACTIVE_MESSAGES, (session_id,))
        return [sessions.message_from_row(row) for row in found]

    async def append_message(
        self,
        session_id: str,
        turn_id: str | None,
        message: ChatMessage,
        *,
        origin: str | None = None,
    ) -> int:
        append = sessions.append_message(session_id, turn_id, message, origin, time.time())
        written = await self._write(*append)
        assert written.lastrowid is not None  # an INSERT into a rowid table always sets it
        return written.lastrowid

    async def find_message_by_origin(self, session_id: str, origin: str) -> StoredMessage | None:
        found = await self._read(sessions.MESSAGE_BY_ORIGIN, (session_id, origin))
        return sessions.message_from_row(found[0]) if found else None

    async def update_message_content(self, message_id: int, content: Content) -> None:
        await self._update_one(*sessions.update_message_content(message_id, content))

    async def deactivate_messages(self, message_ids: Sequence[int]) -> None:
        await self._write(*sessions.deactivate_messages(message_ids))

    async def start_turn(self, session_id: str, turn_id: str) -> TurnRecord:
        record = TurnRecord(id=turn_id, session_id=session_id, started_at=time.time())
        await self._write(*sessions.start_turn(record))
        return record

    async def finish_turn(
        self,
        turn_id: str,
        *,
        status: TurnStatus,
        exit_reason: ExitReason,
        iterations: int,
        error: str | None = None,
    ) -> None:
        finish = sessions.finish_turn(turn_id, status, exit_reason, iterations, error, time.time())
        await self._update_one(*finish)

    async def get_turn(self, turn_id: str) -> TurnRecord | None:
        found = await self._read(sessions.TURN, (turn_id,))
        return sessions.turn_from_row(found[0]) if found else None

    async def list_turns(self, session_id: str) -> list[TurnRecord]:
        found = await self._read(sessions.TURNS_OF, (session_id,))
        return [sessions.turn_from_row(row) for row in found]

    async def fail_running_turns(self, reason: str) -> int:
        written = await self._write(*sessions.fail_running_turns(reason, time.time()))
        return written.rowcount

    # tool calls and approvals (statements in core/store/tool_calls.py) ---------------
    async def record_tool_call(self, record: ToolCallRecord) -> None:
        await self._write(*tool_calls.insert_tool_call(record, "record"))

    async def open_tool_call(self, record: ToolCallRecord) -> int:
        written = await self._write(*tool_calls.insert_tool_call(record, "open"))
        assert written.lastrowid is not None  # an INSERT into a rowid table always sets it
        return written.lastrowid

    async def set_tool_call_status(
        self, seq: int, status: ToolCallStatus, *, approval_id: str | None = None
    ) -> None:
        await self._update_one(*tool_calls.set_tool_call_status(seq, status, approval_id))

    async def finish_tool_call(self, seq: int, record: ToolCallRecord) -> None:
        await self._update_one(*tool_calls.finish_tool_call(seq, record))

    async def list_tool_calls(self, turn_id: str) -> list[ToolCallRecord]:
        found = await self._read(tool_calls.TOOL_CALLS_OF, (turn_id,))
        return [tool_calls.tool_call_from_row(row) for row in found]

    async def create_approval(self, record: ApprovalRecord) -> None:
        await self._write(*tool_calls.create_approval(record))

    async def resolve_approval(
        self, approval_id: str, state: ApprovalState, resolved_by: str | None
    ) -> bool:
        resolve = tool_calls.resolve_approval(approval_id, state, resolved_by, time.time())
        written = await self._write(*resolve)
        return written.rowcount == 1

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        found = await self._read(tool_calls.APPROVAL, (approval_id,))
        return tool_calls.approval_from_row(found[0]) if found else None

    async def set_approval_card(
        self,
        approval_id: str,
        platform: str,
        chat_id: str,
        thread_id: str | None,
        message_id: str,
    ) -> None:
        card = ApprovalCard(platform, chat_id, thread_id, message_id)
        await self._update_one(*tool_calls.set_approval_card(approval_id, card))

    async def pending_approvals(self, session_key: str | None = None) -> list[ApprovalRecord]:
        found = await self._read(*tool_calls.pending_approvals(session_key))
        return [tool_calls.approval_from_row(row) for row in found]

    # inbound queue, dead letters, command syncs (core/store/platforms.py) -------------
    async def enqueue_inbound(self, record: InboundRecord) -> bool:
        written = await self._write(*platforms.enqueue_inbound(record))
        return written.rowcount == 1

    async def set_inbound_state(self, platform: str, update_id: str, state: InboundState) -> None:
        await self._update_one(*platforms.set_inbound_state(platform, update_id, state))

    async def unfinished_inbound(self, platform: str) -> list[InboundRecord]:
        found = await self._read(platforms.UNFINISHED_INBOUND, (platform,))
        return [platforms.inbound_from_row(row) for row in found]

    async def get_inbound(self, platform: str, update_id: str) -> InboundRecord | None:
        found = await self._read(platforms.INBOUND, (platform, update_id))
        return platforms.inbound_from_row(found[0]) if found else None

    async def add_dead_letter(self, letter: DeadLetter) -> int | None:
        written = await self._write(*platforms.add_dead_letter(letter))
        return written.lastrowid if written.rowcount == 1 else None

    async def list_dead_letters(self, platform: str | None = None) -> list[DeadLetter]:
        found = await self._read(*platforms.dead_letters(platform))
        return [platforms.dead_letter_from_row(row) for row in found]

    async def drop_dead_letter(self, letter_id: int) -> bool:
        written = await self._write(*platforms.drop_dead_letter(letter_id))
        return written.rowcount == 1

    async def synced_commands(self, platform: str, scope: str) -> str | None:
        found = await self._read(platforms.SYNCED_COMMANDS, (platform, scope))
        return str(found[0]["digest"]) if found else None

    async def set_synced_commands(self, platform: str, scope: str, digest: str) -> None:
        await self._write(*platforms.set_synced_commands(platform, scope, digest, time.time()))

    # outbox (statements in core/store/outbox.py) --------------------------------------
    async def put_outbox(self, chunks: Sequence[OutboxChunk]) -> list[OutboxChunk]:
        if not chunks:
            return []
        written = await self._write(*outbox.put_outbox(chunks, time.time()))
        if written.rowcount == len(chunks):  # all new (chunks are stored together, from 0)
            return [outbox.outbox_as_stored(chunk) for chunk in chunks]
        found = await self._read(outbox.CHUNKS_OF, (chunks[0].turn_id,))
        return [outbox.outbox_from_row(row) for row in found]

    async def mark_outbox_started(self, turn_id: str, index: int) -> None:
        await self._update_one(*outbox.mark_outbox_started(turn_id, index, time.time()))

    async def mark_outbox_sent(self, turn_id: str, index: int, message_id: str) -> None:
        await self._update_one(*outbox.mark_outbox_sent(turn_id, index, message_id, time.time()))

    # attachments and files sent (statements in core/store/attachments.py) -----------
    async def put_attachment(self, record: AttachmentRecord) -> None:
        await self._write(*attachments.put_attachment(record, time.time()))

    async def attachments_of(self, origin: str) -> list[AttachmentRecord]:
        found = await self._read(attachments.ATTACHMENTS_OF, (origin,))
        return [attachments.attachment_from_row(row) for row in found]

    async def link_attachments(self, origin: str, message_id: int) -> None:
        await self._write(*attachments.link_attachments(origin, message_id))

    async def queue_file(self, queued: QueuedFile) -> bool:
        written = await self._write(*attachments.queue_file(queued))
        return written.rowcount == 1

    async def unsent_files(self, session_id: str) -> list[QueuedFile]:
        found = await self._read(attachments.UNSENT_FILES, (session_id,))
        return [attachments.queued_file_from_row(row) for row in found]

    async def mark_file_started(self, key: str) -> None:
        await self._update_one(*attachments.mark_file_started(key, time.time()))

    async def mark_file_sent(self, key: str, message_id: str) -> None:
        await self._update_one(*attachments.mark_file_sent(key, message_id, time.time()))

    async def mark_file_failed(self, key: str, reason: str) -> None:
        await self._update_one(*attachments.mark_file_failed(key, reason))

    # plumbing ---------------------------------------------------------------
    def _open_connection(self) -> aiosqlite.Connection:
        if self._closed:
            raise StoreError(f"store {self._path} is closed")
        return self._conn

    async def _read(self, sql: str, params: Params) -> list[sqlite3.Row]:
        conn = self._open_connection()
        with _translated(self._path, "read"):
            return list(await conn.execute_fetchall(sql, storable(params)))

    async def _write(self, sql: str, params: Params, doing: str) -> _Written:
        """Run one writing statement, alone, as its own committed transaction."""
        async with self._write_lock:
            conn = self._open_connection()
            with _translated(self._path, doing):
                async with conn.execute(sql, storable(params)) as cursor:
                    return _Written(cursor.rowcount, cursor.lastrowid)

    async def _update_one(self, sql: str, params: Params, target: str) -> None:
        written = await self._write(sql, params, f"update {target}")
        if written.rowcount != 1:
            raise StoreError(f"{self._path}: no {target}")


@contextmanager
def _translated(path: Path, doing: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        unavailable = (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _UNAVAILABLE
        kind = StoreUnavailable if unavailable else StoreError
        raise kind(f"{path}: cannot {doing}: {exc}") from exc


def _conforms(store: SqliteStore) -> Store:
    """Never called: mypy proves here that ``SqliteStore`` satisfies ``Store`` exactly."""
    return store


async def open_store(path: Path) -> SqliteStore:
    """Open (creating it and its parent directories if missing) and migrate the store file.

    Raises ``StoreError`` with the file named, and leaves the file as it was, when it is not
    a SQLite database, not a CommonOS store, or of a schema newer than this code.
    """
    await asyncio.to_thread(_check_file, path)
    with _translated(path, "open the store"):
        conn = await aiosqlite.connect(path, isolation_level=None)
    prepared = False
    try:
        await _prepare(conn, path)
        prepared = True
    finally:
        if not prepared:
            await conn.close()
    log.info("store opened at %s", path)
    return SqliteStore(conn, path)


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
    with _translated(path, "open the store"):
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
