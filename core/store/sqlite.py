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

Every text parameter is made encodable first (:func:`rows.storable`): a lone surrogate is
stored as U+FFFD instead of failing the write.

Foreign errors stop here: every ``sqlite3.Error`` leaves as a ``StoreError`` naming the file
and what was being done; one that means storage cannot be written right now (disk full,
read-only file, I/O error, locked) leaves as its subclass ``StoreUnavailable``. After
:meth:`SqliteStore.close` every operation raises ``StoreError``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import aiosqlite

from core.store import attachments, rows
from core.store.base import (
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
from core.types import ApprovalState, ChatMessage, Content, ExitReason, TurnStatus

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 5000
SQLITE_HEADER = b"SQLite format 3\x00"

Params = Sequence[object]


def _insert_sql(table: str, columns: Sequence[str], suffix: str = "") -> str:
    marks = ", ".join("?" for _ in columns)
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}){suffix}"


_INSERT_SESSION = _insert_sql("sessions", rows.SESSION_COLUMNS)
_INSERT_MESSAGE = _insert_sql(
    "messages", ("session_id", "turn_id", *rows.MESSAGE_COLUMNS, "created_at", "origin")
)
_INSERT_TOOL_CALL = _insert_sql("tool_calls", rows.TOOL_CALL_COLUMNS)
_INSERT_APPROVAL = _insert_sql("approvals", rows.APPROVAL_COLUMNS)
_INSERT_INBOUND = _insert_sql(
    "inbound", rows.INBOUND_COLUMNS, " ON CONFLICT (platform, update_id) DO NOTHING"
)
_INSERT_DEAD_LETTER = _insert_sql(
    "dead_letters", rows.DEAD_LETTER_COLUMNS, " ON CONFLICT (platform, item_id) DO NOTHING"
)
_OUTBOX_CONFLICT = " ON CONFLICT (turn_id, chunk) DO NOTHING"
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

    # sessions ---------------------------------------------------------------
    async def get_active_session(self, key: str) -> SessionRecord | None:
        found = await self._read(
            "SELECT * FROM sessions WHERE key = ? AND ended_at IS NULL", (key,)
        )
        return rows.session_from_row(found[0]) if found else None

    async def create_session(self, key: str, profile: str) -> SessionRecord:
        now = time.time()
        record = SessionRecord(uuid.uuid4().hex, key, profile, now, now)
        await self._write(
            _INSERT_SESSION, rows.session_params(record), f"create a session for key {key!r}"
        )
        return record

    async def end_session(self, session_id: str) -> None:
        sql = "UPDATE sessions SET ended_at = COALESCE(ended_at, ?) WHERE id = ?"
        await self._update_one(sql, (time.time(), session_id), f"session {session_id!r}")

    async def touch_session(self, session_id: str) -> None:
        sql = "UPDATE sessions SET last_active_at = ? WHERE id = ?"
        await self._update_one(sql, (time.time(), session_id), f"session {session_id!r}")

    async def save_session_prompt(
        self, session_id: str, *, frozen_context: str, system_prompt: str, fingerprint: str
    ) -> None:
        sql = (
            "UPDATE sessions SET frozen_context = ?, system_prompt = ?, prompt_fingerprint = ?"
            " WHERE id = ?"
        )
        params = (frozen_context, system_prompt, fingerprint, session_id)
        await self._update_one(sql, params, f"session {session_id!r}")

    # messages ---------------------------------------------------------------
    async def load_active_messages(self, session_id: str) -> list[StoredMessage]:
        found = await self._read(
            "SELECT * FROM messages WHERE session_id = ? AND active = 1 ORDER BY id",
            (session_id,),
        )
        return [rows.message_from_row(row) for row in found]

    async def append_message(
        self,
        session_id: str,
        turn_id: str | None,
        message: ChatMessage,
        *,
        origin: str | None = None,
    ) -> int:
        params = (session_id, turn_id, *rows.message_params(message), time.time(), origin)
        written = await self._write(
            _INSERT_MESSAGE, params, f"append a message to session {session_id!r}"
        )
        assert written.lastrowid is not None  # an INSERT into a rowid table always sets it
        return written.lastrowid

    async def find_message_by_origin(self, session_id: str, origin: str) -> StoredMessage | None:
        found = await self._read(
            "SELECT * FROM messages WHERE session_id = ? AND origin = ? ORDER BY id LIMIT 1",
            (session_id, origin),
        )
        return rows.message_from_row(found[0]) if found else None

    async def update_message_content(self, message_id: int, content: Content) -> None:
        text, is_list = rows.encode_content(content)
        sql = "UPDATE messages SET content = ?, content_is_list = ? WHERE id = ?"
        await self._update_one(sql, (text, is_list, message_id), f"message {message_id}")

    async def deactivate_messages(self, message_ids: Sequence[int]) -> None:
        # One statement however many ids: atomic for readers, and no bound-variable limit.
        sql = "UPDATE messages SET active = 0 WHERE id IN (SELECT value FROM json_each(?))"
        await self._write(sql, (json.dumps(list(message_ids)),), "deactivate messages")

    # turns ------------------------------------------------------------------
    async def start_turn(self, session_id: str, turn_id: str) -> TurnRecord:
        record = TurnRecord(id=turn_id, session_id=session_id, started_at=time.time())
        sql = "INSERT INTO turns (id, session_id, started_at) VALUES (?, ?, ?)"
        params = (record.id, record.session_id, record.started_at)
        await self._write(sql, params, f"start turn {turn_id!r} in session {session_id!r}")
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
        sql = (
            "UPDATE turns SET status = ?, exit_reason = ?, iterations = ?, error = ?,"
            " finished_at = ? WHERE id = ?"
        )
        params = (status, exit_reason, iterations, error, time.time(), turn_id)
        await self._update_one(sql, params, f"turn {turn_id!r}")

    async def get_turn(self, turn_id: str) -> TurnRecord | None:
        found = await self._read("SELECT * FROM turns WHERE id = ?", (turn_id,))
        return rows.turn_from_row(found[0]) if found else None

    async def list_turns(self, session_id: str) -> list[TurnRecord]:
        found = await self._read(
            "SELECT * FROM turns WHERE session_id = ? ORDER BY started_at, rowid", (session_id,)
        )
        return [rows.turn_from_row(row) for row in found]

    async def fail_running_turns(self, reason: str) -> int:
        sql = (
            "UPDATE turns SET status = 'failed', exit_reason = 'crashed', error = ?,"
            " finished_at = ? WHERE status = 'running'"
        )
        written = await self._write(sql, (reason, time.time()), "fail running turns")
        return written.rowcount

    # tool calls and approvals -----------------------------------------------
    async def record_tool_call(self, record: ToolCallRecord) -> None:
        doing = f"record tool call {record.call_id!r} of turn {record.turn_id!r}"
        await self._write(_INSERT_TOOL_CALL, rows.tool_call_params(record), doing)

    async def open_tool_call(self, record: ToolCallRecord) -> int:
        doing = f"open tool call {record.call_id!r} of turn {record.turn_id!r}"
        written = await self._write(_INSERT_TOOL_CALL, rows.tool_call_params(record), doing)
        assert written.lastrowid is not None  # an INSERT into a rowid table always sets it
        return written.lastrowid

    async def set_tool_call_status(
        self, seq: int, status: ToolCallStatus, *, approval_id: str | None = None
    ) -> None:
        sql = (
            "UPDATE tool_calls SET status = ?, approval_id = COALESCE(?, approval_id) WHERE seq = ?"
        )
        await self._update_one(sql, (status, approval_id, seq), f"tool call #{seq}")

    async def finish_tool_call(self, seq: int, record: ToolCallRecord) -> None:
        assignments = ", ".join(f"{column} = ?" for column in rows.TOOL_CALL_END_COLUMNS)
        sql = f"UPDATE tool_calls SET {assignments} WHERE seq = ?"
        params = (*rows.tool_call_end_params(record), seq)
        await self._update_one(sql, params, f"tool call #{seq}")

    async def list_tool_calls(self, turn_id: str) -> list[ToolCallRecord]:
        found = await self._read(
            "SELECT * FROM tool_calls WHERE turn_id = ? ORDER BY seq", (turn_id,)
        )
        return [rows.tool_call_from_row(row) for row in found]

    async def create_approval(self, record: ApprovalRecord) -> None:
        doing = f"create approval {record.id!r} for turn {record.turn_id!r}"
        await self._write(_INSERT_APPROVAL, rows.approval_params(record), doing)

    async def resolve_approval(
        self, approval_id: str, state: ApprovalState, resolved_by: str | None
    ) -> bool:
        if state == "pending":
            raise ValueError("an approval cannot be resolved to 'pending'")
        sql = (
            "UPDATE approvals SET state = ?, resolved_by = ?, resolved_at = ?"
            " WHERE id = ? AND state = 'pending'"
        )
        params = (state, resolved_by, time.time(), approval_id)
        written = await self._write(sql, params, f"resolve approval {approval_id!r}")
        return written.rowcount == 1

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        found = await self._read("SELECT * FROM approvals WHERE id = ?", (approval_id,))
        return rows.approval_from_row(found[0]) if found else None

    async def set_approval_card(
        self,
        approval_id: str,
        platform: str,
        chat_id: str,
        thread_id: str | None,
        message_id: str,
    ) -> None:
        sql = (
            "UPDATE approvals SET card_platform = ?, card_chat_id = ?, card_thread_id = ?,"
            " card_message_id = ? WHERE id = ?"
        )
        params = (platform, chat_id, thread_id, message_id, approval_id)
        await self._update_one(sql, params, f"approval {approval_id!r}")

    async def pending_approvals(self, session_key: str | None = None) -> list[ApprovalRecord]:
        sql = "SELECT * FROM approvals WHERE state = 'pending'"
        params: tuple[str, ...] = ()
        if session_key is not None:
            sql, params = sql + " AND session_key = ?", (session_key,)
        found = await self._read(sql + " ORDER BY requested_at, rowid", params)
        return [rows.approval_from_row(row) for row in found]

    # inbound queue ----------------------------------------------------------
    async def enqueue_inbound(self, record: InboundRecord) -> bool:
        doing = f"enqueue inbound {record.platform}/{record.update_id}"
        written = await self._write(_INSERT_INBOUND, rows.inbound_params(record), doing)
        return written.rowcount == 1

    async def set_inbound_state(self, platform: str, update_id: str, state: InboundState) -> None:
        sql = "UPDATE inbound SET state = ? WHERE platform = ? AND update_id = ?"
        params = (state, platform, update_id)
        await self._update_one(sql, params, f"inbound item {platform}/{update_id}")

    async def unfinished_inbound(self, platform: str) -> list[InboundRecord]:
        found = await self._read(
            "SELECT * FROM inbound WHERE platform = ? AND state IN ('pending', 'processing')"
            " ORDER BY received_at, rowid",
            (platform,),
        )
        return [rows.inbound_from_row(row) for row in found]

    async def get_inbound(self, platform: str, update_id: str) -> InboundRecord | None:
        found = await self._read(
            "SELECT * FROM inbound WHERE platform = ? AND update_id = ?", (platform, update_id)
        )
        return rows.inbound_from_row(found[0]) if found else None

    # dead letters -----------------------------------------------------------
    async def add_dead_letter(self, letter: DeadLetter) -> int | None:
        doing = f"keep dead letter {letter.platform}/{letter.item_id}"
        written = await self._write(_INSERT_DEAD_LETTER, rows.dead_letter_params(letter), doing)
        return written.lastrowid if written.rowcount == 1 else None

    async def list_dead_letters(self, platform: str | None = None) -> list[DeadLetter]:
        sql = "SELECT * FROM dead_letters"
        params: tuple[str, ...] = ()
        if platform is not None:
            sql, params = sql + " WHERE platform = ?", (platform,)
        found = await self._read(sql + " ORDER BY id", params)
        return [rows.dead_letter_from_row(row) for row in found]

    async def drop_dead_letter(self, letter_id: int) -> bool:
        sql = "DELETE FROM dead_letters WHERE id = ?"
        written = await self._write(sql, (letter_id,), f"drop dead letter {letter_id}")
        return written.rowcount == 1

    # command syncs ----------------------------------------------------------
    async def synced_commands(self, platform: str, scope: str) -> str | None:
        found = await self._read(
            "SELECT digest FROM command_syncs WHERE platform = ? AND scope = ?", (platform, scope)
        )
        return str(found[0]["digest"]) if found else None

    async def set_synced_commands(self, platform: str, scope: str, digest: str) -> None:
        sql = (
            "INSERT INTO command_syncs (platform, scope, digest, synced_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (platform, scope) DO UPDATE"
            " SET digest = excluded.digest, synced_at = excluded.synced_at"
        )
        params = (platform, scope, digest, time.time())
        await self._write(sql, params, f"record the {platform} commands synced for {scope}")

    # outbox -----------------------------------------------------------------
    async def put_outbox(self, chunks: Sequence[OutboxChunk]) -> list[OutboxChunk]:
        if not chunks:
            return []
        turn_id, now = chunks[0].turn_id, time.time()
        values = ", ".join("(?, ?, ?, ?, ?, ?, ?, ?)" for _ in chunks)
        params = [v for c in chunks for v in rows.outbox_params(c, now)]
        sql = f"INSERT INTO outbox ({', '.join(rows.OUTBOX_COLUMNS)}) VALUES {values}"
        doing = f"store the reply of turn {turn_id}"
        written = await self._write(sql + _OUTBOX_CONFLICT, params, doing)
        if written.rowcount == len(chunks):  # all new (chunks are stored together, from 0)
            return [rows.outbox_as_stored(chunk) for chunk in chunks]
        found = await self._read(
            "SELECT * FROM outbox WHERE turn_id = ? ORDER BY chunk", (turn_id,)
        )
        return [rows.outbox_from_row(row) for row in found]

    async def mark_outbox_started(self, turn_id: str, index: int) -> None:
        # The first start is kept: a lookup after a crash searches from it.
        sql = (
            "UPDATE outbox SET started_at = COALESCE(started_at, ?) WHERE turn_id = ? AND chunk = ?"
        )
        params = (time.time(), turn_id, index)
        await self._update_one(sql, params, f"outbox chunk {index} of turn {turn_id}")

    async def mark_outbox_sent(self, turn_id: str, index: int, message_id: str) -> None:
        sql = "UPDATE outbox SET message_id = ?, sent_at = ? WHERE turn_id = ? AND chunk = ?"
        params = (message_id, time.time(), turn_id, index)
        await self._update_one(sql, params, f"outbox chunk {index} of turn {turn_id}")

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
            return list(await conn.execute_fetchall(sql, rows.storable(params)))

    async def _write(self, sql: str, params: Params, doing: str) -> _Written:
        """Run one writing statement, alone, as its own committed transaction."""
        async with self._write_lock:
            conn = self._open_connection()
            with _translated(self._path, doing):
                async with conn.execute(sql, rows.storable(params)) as cursor:
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
