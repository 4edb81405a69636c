"""The ``Store`` on one SQLite file, through aiosqlite.

Opening (:func:`open_store`, through :mod:`core.store.connection`) refuses, without
changing a byte, a file that is not SQLite, a SQLite file that is not ours, and a store
written by newer code; otherwise it switches the file to WAL, turns foreign keys on, sets a
busy timeout and applies pending migrations.

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
  committed before the method returns; the statement and its cursor's close are one queued
  call on the connection's thread. The one exception is the close of a turn
  (``finish_turn`` given its session): the turn's final status and the session's last
  activity are one transaction in one queued call, both kept or neither. A caller
  cancelled while waiting does not undo its write: once queued, the call runs whole (and
  is never half-applied).
* **Reads never see a half-written turn.** Readers share the same connection, whose single
  worker thread runs one queued call at a time; a call is atomic for them, so a reader
  sees the state before or after a write, never inside one: the one transaction of two
  statements begins and ends inside its call, so there is no open transaction between
  calls for a reader to peek into, and nothing is ever rolled back behind a reader's
  back. Another process reading the file gets WAL snapshot isolation.
* **Compare-and-set** (``resolve_approval``) is ``UPDATE ... WHERE state = 'pending'``;
  **idempotent enqueue** is ``INSERT ... ON CONFLICT DO NOTHING``; both report the row
  count.

The SQL and the row mapping of each table group live beside this module, as values
(:mod:`core.store.statements`); this one holds the connection and runs them (``take_*``
as ``DELETE ... RETURNING``: a code is taken once). Text parameters are bound as given:
text was made valid where it entered the gateway (:mod:`core.text`).

Foreign errors stop here (:func:`core.store.connection.store_error`): every ``sqlite3.Error``
leaves as a ``StoreError`` naming the file and what was being done; one that means
storage cannot be written right now (disk full, read-only file, I/O error, locked) leaves
as its subclass ``StoreUnavailable``. After
:meth:`SqliteStore.close` every operation raises ``StoreError``.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple, cast

import aiosqlite

from core.store import access, attachments, live_streams, outbox, platforms, sessions, tool_calls
from core.store import settings as chat_settings
from core.store.base import (
    ActiveSession,
    ApprovalCard,
    ApprovalRecord,
    AttachmentRecord,
    DeadLetter,
    InboundRecord,
    InboundState,
    LinkCode,
    OutboxChunk,
    PairedUser,
    PairingCode,
    QueuedFile,
    SessionRecord,
    SessionSettings,
    Store,
    StoredMessage,
    StoreError,
    StreamRecord,
    ToolCallRecord,
    ToolCallStatus,
    TurnRecord,
)
from core.store.connection import open_connection, store_error
from core.store.statements import Statement
from core.types import ApprovalState, ChatMessage, Content, ExitReason, TurnStatus

log = logging.getLogger(__name__)

Params = Sequence[object]


class _Written(NamedTuple):
    rowcount: int
    lastrowid: int | None


class SqliteStore:
    """SQLite implementation of :class:`core.store.base.Store`. Create with ``open_store``."""

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        self._conn = conn
        self._path = path
        self._db = conn._conn
        self._queue = cast(Callable[..., Awaitable[Any]], conn._execute)
        """aiosqlite's queue to the connection's thread (it has no public one): a function
        given there runs whole between the other statements, so several statements run
        together are atomic for the readers sharing the connection."""
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
        await self._write(*sessions.end_session(session_id, time.time()), one=True)

    async def touch_session(self, session_id: str) -> None:
        await self._write(*sessions.touch_session(session_id, time.time()), one=True)

    async def save_session_prompt(
        self, session_id: str, *, frozen_context: str, system_prompt: str, fingerprint: str
    ) -> None:
        prompt = sessions.save_session_prompt(
            session_id, frozen_context, system_prompt, fingerprint
        )
        await self._write(*prompt, one=True)

    async def load_active_session(self, key: str) -> ActiveSession | None:
        if self._closed:
            raise self._closed_error()
        try:
            found: ActiveSession | None = await self._queue(partial(_active_session, key), self._db)
        except sqlite3.Error as exc:
            raise store_error(self._path, "read", exc) from exc
        return found

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
        also: tuple[str, ...] = (),
    ) -> int:
        append = sessions.append_message(session_id, turn_id, message, origin, also, time.time())
        written = await self._write(*append)
        assert written.lastrowid is not None  # an INSERT into a rowid table always sets it
        return written.lastrowid

    async def find_message_by_origin(self, session_id: str, origin: str) -> StoredMessage | None:
        found = await self._read(sessions.MESSAGE_BY_ORIGIN, (session_id, origin))
        return sessions.message_from_row(found[0]) if found else None

    async def update_message_content(self, message_id: int, content: Content) -> None:
        await self._write(*sessions.update_message_content(message_id, content), one=True)

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
        session_id: str | None = None,
    ) -> None:
        now = time.time()
        finish = sessions.finish_turn(turn_id, status, exit_reason, iterations, error, now)
        if session_id is None:
            await self._write(*finish, one=True)
        else:
            await self._write_each((finish, sessions.touch_session(session_id, now)))

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
        await self._write(*tool_calls.set_tool_call_status(seq, status, approval_id), one=True)

    async def finish_tool_call(self, seq: int, record: ToolCallRecord) -> None:
        await self._write(*tool_calls.finish_tool_call(seq, record), one=True)

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
        await self._write(*tool_calls.set_approval_card(approval_id, card), one=True)

    async def pending_approvals(self, session_key: str | None = None) -> list[ApprovalRecord]:
        found = await self._read(*tool_calls.pending_approvals(session_key))
        return [tool_calls.approval_from_row(row) for row in found]

    # inbound queue, dead letters, command syncs (core/store/platforms.py) -------------
    async def enqueue_inbound(self, record: InboundRecord) -> bool:
        written = await self._write(*platforms.enqueue_inbound(record))
        return written.rowcount == 1

    async def set_inbound_state(self, platform: str, update_id: str, state: InboundState) -> None:
        await self._write(*platforms.set_inbound_state(platform, update_id, state), one=True)

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
            return list(map(outbox.as_stored, chunks))
        found = await self._read(outbox.CHUNKS_OF, (chunks[0].turn_id,))
        return [outbox.outbox_from_row(row) for row in found]

    async def mark_outbox_started(self, turn_id: str, index: int) -> None:
        await self._write(*outbox.mark_outbox_started(turn_id, index, time.time()), one=True)

    async def mark_outbox_sent(self, turn_id: str, index: int, message_id: str) -> None:
        sent = outbox.mark_outbox_sent(turn_id, index, message_id, time.time())
        await self._write(*sent, one=True)

    # live streams (statements in core/store/live_streams.py) ------------------------
    async def put_stream(self, record: StreamRecord) -> None:
        await self._write(*live_streams.put_stream(record, time.time()))

    async def stream_of(self, session_key: str) -> StreamRecord | None:
        found = await self._read(live_streams.STREAM_OF, (session_key,))
        return live_streams.stream_from_rows(found)

    async def drop_stream(self, session_key: str, message_id: str) -> None:
        await self._write(*live_streams.drop_stream(session_key, message_id))

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

    async def unsent_file_sessions(self) -> list[str]:
        return [row["key"] for row in await self._read(attachments.UNSENT_SESSIONS, ())]

    async def mark_file_started(self, key: str) -> None:
        await self._write(*attachments.mark_file_started(key, time.time()), one=True)

    async def mark_file_sent(self, key: str, message_id: str) -> None:
        await self._write(*attachments.mark_file_sent(key, message_id, time.time()), one=True)

    async def mark_file_failed(self, key: str, reason: str) -> None:
        await self._write(*attachments.mark_file_failed(key, reason), one=True)

    # pairing, identity links (core/store/access.py), chat settings (settings.py) -----
    async def put_pairing_code(self, code: PairingCode) -> None:
        await self._write(*access.put_pairing_code(code))

    async def pairing_codes(self, platform: str | None = None) -> list[PairingCode]:
        return [
            access.pairing_code_from_row(r)
            for r in await self._read(*access.pairing_codes(platform))
        ]

    async def take_pairing_code(self, code_hash: str) -> PairingCode | None:
        taken = await self._take(*access.take_pairing_code(code_hash))
        return access.pairing_code_from_row(taken[0]) if taken else None

    async def drop_pairing_codes(self, before: float) -> int:
        return (await self._write(*access.drop_pairing_codes(before))).rowcount

    async def pair_user(self, user: PairedUser) -> None:
        await self._write(*access.pair_user(user))

    async def unpair_user(self, platform: str, user_id: str) -> bool:
        return (await self._write(*access.unpair_user(platform, user_id))).rowcount == 1

    async def paired_users(self, platform: str | None = None) -> list[PairedUser]:
        return [
            access.paired_user_from_row(r) for r in await self._read(*access.paired_users(platform))
        ]

    async def mark_paired_announced(self, platform: str, user_id: str) -> None:
        await self._write(*access.mark_paired_announced(platform, user_id), one=True)

    async def session_settings(self, session_key: str) -> SessionSettings:
        found = await self._read(chat_settings.SESSION_SETTINGS, (session_key,))
        return chat_settings.settings_from_rows(found) if found else SessionSettings()

    async def put_session_settings(self, session_key: str, settings: SessionSettings) -> None:
        await self._write(*chat_settings.put_session_settings(session_key, settings, time.time()))

    async def put_link_code(self, code: LinkCode) -> None:
        await self._write(*access.put_link_code(code))

    async def take_link_code(self, code_hash: str) -> LinkCode | None:
        taken = await self._take(*access.take_link_code(code_hash))
        return access.link_code_from_row(taken[0]) if taken else None

    async def link_identity(self, platform: str, user_id: str, person: str) -> None:
        await self._write(*access.link_identity(platform, user_id, person, time.time()))

    async def person_of(self, platform: str, user_id: str) -> str | None:
        found = await self._read(access.PERSON_OF, (platform, user_id))
        return str(found[0]["person"]) if found else None

    async def identities_of(self, person: str) -> list[tuple[str, str]]:
        return [
            (r["platform"], r["user_id"]) for r in await self._read(access.IDENTITIES_OF, (person,))
        ]

    async def identity_links(self) -> list[tuple[str, str, str]]:
        rows = await self._read(access.IDENTITY_LINKS, ())
        return [(r["platform"], r["user_id"], r["person"]) for r in rows]

    async def unlink_identity(self, platform: str, user_id: str) -> bool:
        return (await self._write(*access.unlink_identity(platform, user_id))).rowcount == 1

    # statements of feature modules (core/store/jobs.py) -------------------------
    async def run_statement(self, statement: Statement) -> int:
        """Run one writing statement alone, committed; its row count."""
        return (await self._write(*statement)).rowcount

    async def read_rows(self, sql: str, params: Params) -> list[sqlite3.Row]:
        return await self._read(sql, params)

    # plumbing ---------------------------------------------------------------
    def _closed_error(self) -> StoreError:
        return StoreError(f"store {self._path} is closed")

    async def _read(self, sql: str, params: Params) -> list[sqlite3.Row]:
        if self._closed:
            raise self._closed_error()
        try:
            return list(await self._conn.execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            raise store_error(self._path, "read", exc) from exc

    async def _write(self, sql: str, params: Params, doing: str, *, one: bool = False) -> _Written:
        """Run one writing statement, alone, as its own committed transaction: one queued
        call on the connection's thread (the statement and its cursor's close in one hop).
        ``one``: it must change exactly one row, which ``doing`` names (``StoreError``
        "no <doing>" otherwise)."""
        async with self._write_lock:
            if self._closed:
                raise self._closed_error()
            try:
                written: _Written = await self._queue(partial(_run_one, sql, params), self._db)
            except sqlite3.Error as exc:
                raise store_error(self._path, f"update {doing}" if one else doing, exc) from exc
        if one and written.rowcount != 1:
            raise StoreError(f"{self._path}: no {doing}")
        return written

    async def _write_each(self, statements: Sequence[Statement]) -> None:
        """Statements that must each change exactly one row, as one transaction in one
        queued call: all kept, or none and ``StoreError`` "no <doing>" of the first that
        changed none."""
        async with self._write_lock:
            if self._closed:
                raise self._closed_error()
            try:
                missing: str | None = await self._queue(partial(_run_each, statements), self._db)
            except sqlite3.Error as exc:
                raise store_error(self._path, f"update {statements[0].doing}", exc) from exc
        if missing is not None:
            raise StoreError(f"{self._path}: no {missing}")

    async def _take(self, sql: str, params: Params, doing: str) -> list[sqlite3.Row]:
        """Run one ``DELETE ... RETURNING`` alone, under the write lock; the rows it took."""
        async with self._write_lock:
            if self._closed:
                raise self._closed_error()
            try:
                return list(await self._conn.execute_fetchall(sql, params))
            except sqlite3.Error as exc:
                raise store_error(self._path, doing, exc) from exc


def _run_one(sql: str, params: Params, db: sqlite3.Connection) -> _Written:
    """On the connection's thread: the statement, its counts, its cursor closed."""
    cursor = db.execute(sql, params)
    try:
        return _Written(cursor.rowcount, cursor.lastrowid)
    finally:
        cursor.close()


def _active_session(key: str, db: sqlite3.Connection) -> ActiveSession | None:
    """On the connection's thread: the open session of ``key`` and its active messages,
    read in one call (no write comes between the two reads)."""
    found = _rows(db, sessions.ACTIVE_SESSION, (key,))
    if not found:
        return None
    session = sessions.session_from_row(found[0])
    messages = _rows(db, sessions.ACTIVE_MESSAGES, (session.id,))
    return ActiveSession(session, [sessions.message_from_row(row) for row in messages])


def _rows(db: sqlite3.Connection, sql: str, params: Params) -> list[sqlite3.Row]:
    cursor = db.execute(sql, params)
    try:
        return cursor.fetchall()
    finally:
        cursor.close()


def _run_each(statements: Sequence[Statement], db: sqlite3.Connection) -> str | None:
    """On the connection's thread: ``statements`` in one transaction, each changing exactly
    one row; what the first that changed none names (the transaction rolled back), else
    None (committed)."""
    db.execute("BEGIN").close()
    try:
        for sql, params, doing in statements:
            if _run_one(sql, params, db).rowcount != 1:
                return doing
        db.execute("COMMIT").close()
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK").close()
    return None


def _conforms(store: SqliteStore) -> Store:
    """Never called: mypy proves here that ``SqliteStore`` satisfies ``Store`` exactly."""
    return store


async def open_store(path: Path) -> SqliteStore:
    """Open (creating it and its parent directories if missing) and migrate the store file.

    Raises ``StoreError`` with the file named, and leaves the file as it was, when it is not
    a SQLite database, not a CommonOS store, or of a schema newer than this code
    (:func:`core.store.connection.open_connection`).
    """
    conn = await open_connection(path)
    log.info("store opened at %s", path)
    return SqliteStore(conn, path)
