"""The ``Store`` on PostgreSQL, through an asyncpg pool, shared by several gateway processes
(docs/cluster.md, issue 23).

Why asyncpg: asyncio-native, the binary protocol and its prepared-statement cache make the
hot path (one statement per write) the fastest available, ``add_listener`` gives LISTEN on
a dedicated connection (``gateway.cluster.mailbox``), and it is one dependency.

How the contract of :mod:`core.store.base` is kept:

* **The same statements as SQLite.** Each method builds the statement value the SQLite
  store runs (:mod:`core.store.sessions`, :mod:`core.store.tool_calls`, ...) and runs its
  PostgreSQL form (:mod:`core.store.pg_statements`: placeholders, the few statements PG
  says differently, NUL-free text). Ids SQLite reads as ``lastrowid`` come back with
  ``RETURNING``.
* **Each write commits before the method returns**: one statement in autocommit, or, under
  a fence, one short transaction; a turn's close (``finish_turn`` given its session: the
  turn's status and the session's last activity) is one transaction of two statements.
  A caller cancelled mid-write does not undo it: the write runs shielded, whole or not at
  all.
* **Fencing.** When the work runs under :func:`core.store.fencing.fenced`, every write is
  ``BEGIN; <fence check> FOR SHARE; <the write>; COMMIT``
  (:func:`core.store.pg_cluster_tables.guard`): a process that lost the lease (taken over
  with a new epoch, or expired) writes nothing and gets :class:`~core.store.fencing.Fenced`;
  the ``FOR SHARE`` lock makes a takeover wait for a write already checked, so no write
  lands after one. Reads are never fenced.
* **Reads never see a half-written turn**: each statement is atomic and sees committed
  rows only; no method spans statements a reader could observe half-done.
* ``fail_running_turns`` fails only turns whose session lease is not live: another live
  process's running turns are left alone. ``start_turn`` records ``turns.process_id``.

Foreign errors stop at :func:`core.store.pg_connection.translated`: ``StoreUnavailable``
when the server cannot serve right now, ``StoreError`` otherwise, each naming the masked URL
(:attr:`PgStore.display`), never the password. After :meth:`PgStore.close` every operation
raises ``StoreError``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import asyncpg

from core.store import access, attachments, live_streams, outbox, platforms, sessions, tool_calls
from core.store import pg_statements as pg
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
from core.store.fencing import Fence, current_fence
from core.store.pg_cluster_tables import guard
from core.store.pg_connection import mask_url, open_pool, translated
from core.store.pg_migrations import migrate
from core.store.statements import Statement
from core.types import ApprovalState, ChatMessage, Content, ExitReason, TurnStatus

log = logging.getLogger(__name__)

T = TypeVar("T")
Params = Sequence[object]
Run = Callable[[asyncpg.Connection, str, tuple[object, ...]], Awaitable[T]]


def _rowcount(status: str) -> int:
    """The row count of a command status (``UPDATE 1``, ``INSERT 0 3``, ``DELETE 0``)."""
    return int(status.rsplit(" ", 1)[-1])


class PgStore:
    """PostgreSQL implementation of :class:`core.store.base.Store`; ``open_pg_store``."""

    def __init__(self, pool: asyncpg.Pool, dsn: str, process_id: str) -> None:
        self.pool = pool
        self.dsn = dsn
        self.display = mask_url(dsn)
        self.process_id = process_id
        self._closed = False

    async def close(self) -> None:
        """Close the pool once running statements are done; later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        await self.pool.close()

    # sessions, messages, turns (statements in core/store/sessions.py) ----------------
    async def get_active_session(self, key: str) -> SessionRecord | None:
        found = await self._read(sessions.ACTIVE_SESSION, (key,))
        return sessions.session_from_row(found[0]) if found else None

    async def create_session(self, key: str, profile: str) -> SessionRecord:
        now = time.time()
        record = SessionRecord(uuid.uuid4().hex, key, profile, now, now)
        await self._write(sessions.create_session(record))
        return record

    async def end_session(self, session_id: str) -> None:
        await self._update_one(sessions.end_session(session_id, time.time()))

    async def touch_session(self, session_id: str) -> None:
        await self._update_one(sessions.touch_session(session_id, time.time()))

    async def save_session_prompt(
        self, session_id: str, *, frozen_context: str, system_prompt: str, fingerprint: str
    ) -> None:
        prompt = sessions.save_session_prompt(
            session_id, frozen_context, system_prompt, fingerprint
        )
        await self._update_one(prompt)

    async def load_active_session(self, key: str) -> ActiveSession | None:
        session = await self.get_active_session(key)
        if session is None:
            return None
        return ActiveSession(session, await self.load_active_messages(session.id))

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
        [row] = await self._returning(pg.returning(append, "id"))
        return int(row["id"])

    async def find_message_by_origin(self, session_id: str, origin: str) -> StoredMessage | None:
        found = await self._read(sessions.MESSAGE_BY_ORIGIN, (session_id, origin))
        return sessions.message_from_row(found[0]) if found else None

    async def update_message_content(self, message_id: int, content: Content) -> None:
        await self._update_one(sessions.update_message_content(message_id, content))

    async def deactivate_messages(self, message_ids: Sequence[int]) -> None:
        await self._write(sessions.deactivate_messages(message_ids))

    async def start_turn(self, session_id: str, turn_id: str) -> TurnRecord:
        record = TurnRecord(id=turn_id, session_id=session_id, started_at=time.time())
        await self._write(pg.start_turn(record, self.process_id))
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
            await self._update_one(finish)
        else:
            await self._update_each((finish, sessions.touch_session(session_id, now)))

    async def get_turn(self, turn_id: str) -> TurnRecord | None:
        found = await self._read(sessions.TURN, (turn_id,))
        return sessions.turn_from_row(found[0]) if found else None

    async def list_turns(self, session_id: str) -> list[TurnRecord]:
        found = await self._read(sessions.TURNS_OF, (session_id,))
        return [sessions.turn_from_row(row) for row in found]

    async def fail_running_turns(self, reason: str) -> int:
        return await self._write(pg.fail_running_turns(reason, time.time()))

    # tool calls and approvals (statements in core/store/tool_calls.py) ---------------
    async def record_tool_call(self, record: ToolCallRecord) -> None:
        await self._write(tool_calls.insert_tool_call(record, "record"))

    async def open_tool_call(self, record: ToolCallRecord) -> int:
        opened = pg.returning(tool_calls.insert_tool_call(record, "open"), "seq")
        [row] = await self._returning(opened)
        return int(row["seq"])

    async def set_tool_call_status(
        self, seq: int, status: ToolCallStatus, *, approval_id: str | None = None
    ) -> None:
        await self._update_one(tool_calls.set_tool_call_status(seq, status, approval_id))

    async def finish_tool_call(self, seq: int, record: ToolCallRecord) -> None:
        await self._update_one(tool_calls.finish_tool_call(seq, record))

    async def list_tool_calls(self, turn_id: str) -> list[ToolCallRecord]:
        found = await self._read(tool_calls.TOOL_CALLS_OF, (turn_id,))
        return [tool_calls.tool_call_from_row(row) for row in found]

    async def create_approval(self, record: ApprovalRecord) -> None:
        await self._write(tool_calls.create_approval(record))

    async def resolve_approval(
        self, approval_id: str, state: ApprovalState, resolved_by: str | None
    ) -> bool:
        resolve = tool_calls.resolve_approval(approval_id, state, resolved_by, time.time())
        return await self._write(resolve) == 1

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
        await self._update_one(tool_calls.set_approval_card(approval_id, card))

    async def pending_approvals(self, session_key: str | None = None) -> list[ApprovalRecord]:
        found = await self._read(*tool_calls.pending_approvals(session_key))
        return [tool_calls.approval_from_row(row) for row in found]

    # inbound queue, dead letters, command syncs (core/store/platforms.py) -------------
    async def enqueue_inbound(self, record: InboundRecord) -> bool:
        return await self._write(platforms.enqueue_inbound(record)) == 1

    async def set_inbound_state(self, platform: str, update_id: str, state: InboundState) -> None:
        await self._update_one(platforms.set_inbound_state(platform, update_id, state))

    async def unfinished_inbound(self, platform: str) -> list[InboundRecord]:
        found = await self._read(platforms.UNFINISHED_INBOUND, (platform,))
        return [platforms.inbound_from_row(row) for row in found]

    async def get_inbound(self, platform: str, update_id: str) -> InboundRecord | None:
        found = await self._read(platforms.INBOUND, (platform, update_id))
        return platforms.inbound_from_row(found[0]) if found else None

    async def add_dead_letter(self, letter: DeadLetter) -> int | None:
        kept = await self._returning(pg.returning(platforms.add_dead_letter(letter), "id"))
        return int(kept[0]["id"]) if kept else None

    async def list_dead_letters(self, platform: str | None = None) -> list[DeadLetter]:
        found = await self._read(*platforms.dead_letters(platform))
        return [platforms.dead_letter_from_row(row) for row in found]

    async def drop_dead_letter(self, letter_id: int) -> bool:
        return await self._write(platforms.drop_dead_letter(letter_id)) == 1

    async def synced_commands(self, platform: str, scope: str) -> str | None:
        found = await self._read(platforms.SYNCED_COMMANDS, (platform, scope))
        return str(found[0]["digest"]) if found else None

    async def set_synced_commands(self, platform: str, scope: str, digest: str) -> None:
        await self._write(platforms.set_synced_commands(platform, scope, digest, time.time()))

    # outbox (statements in core/store/outbox.py) --------------------------------------
    async def put_outbox(self, chunks: Sequence[OutboxChunk]) -> list[OutboxChunk]:
        if not chunks:
            return []
        new = await self._returning(pg.returning(outbox.put_outbox(chunks, time.time()), "*"))
        if len(new) != len(chunks):  # some were stored before: the stored ones win
            new = await self._read(outbox.CHUNKS_OF, (chunks[0].turn_id,))
        return sorted((outbox.outbox_from_row(row) for row in new), key=lambda c: c.index)

    async def mark_outbox_started(self, turn_id: str, index: int) -> None:
        await self._update_one(outbox.mark_outbox_started(turn_id, index, time.time()))

    async def mark_outbox_sent(self, turn_id: str, index: int, message_id: str) -> None:
        await self._update_one(outbox.mark_outbox_sent(turn_id, index, message_id, time.time()))

    # live streams (statements in core/store/live_streams.py) ------------------------
    async def put_stream(self, record: StreamRecord) -> None:
        await self._write(live_streams.put_stream(record, time.time()))

    async def stream_of(self, session_key: str) -> StreamRecord | None:
        found = await self._read(live_streams.STREAM_OF, (session_key,))
        return live_streams.stream_from_rows(found)

    async def drop_stream(self, session_key: str, message_id: str) -> None:
        await self._write(live_streams.drop_stream(session_key, message_id))

    # attachments and files sent (statements in core/store/attachments.py) -----------
    async def put_attachment(self, record: AttachmentRecord) -> None:
        await self._write(attachments.put_attachment(record, time.time()))

    async def attachments_of(self, origin: str) -> list[AttachmentRecord]:
        found = await self._read(attachments.ATTACHMENTS_OF, (origin,))
        return [attachments.attachment_from_row(row) for row in found]

    async def link_attachments(self, origin: str, message_id: int) -> None:
        await self._write(attachments.link_attachments(origin, message_id))

    async def queue_file(self, queued: QueuedFile) -> bool:
        return await self._write(attachments.queue_file(queued)) == 1

    async def unsent_files(self, session_id: str) -> list[QueuedFile]:
        found = await self._read(attachments.UNSENT_FILES, (session_id,))
        return [attachments.queued_file_from_row(row) for row in found]

    async def unsent_file_sessions(self) -> list[str]:
        return [row["key"] for row in await self._read(attachments.UNSENT_SESSIONS, ())]

    async def mark_file_started(self, key: str) -> None:
        await self._update_one(attachments.mark_file_started(key, time.time()))

    async def mark_file_sent(self, key: str, message_id: str) -> None:
        await self._update_one(attachments.mark_file_sent(key, message_id, time.time()))

    async def mark_file_failed(self, key: str, reason: str) -> None:
        await self._update_one(attachments.mark_file_failed(key, reason))

    # pairing, identity links (core/store/access.py), chat settings (settings.py) -----
    async def put_pairing_code(self, code: PairingCode) -> None:
        await self._write(access.put_pairing_code(code))

    async def pairing_codes(self, platform: str | None = None) -> list[PairingCode]:
        found = await self._read(*access.pairing_codes(platform))
        return [access.pairing_code_from_row(row) for row in found]

    async def take_pairing_code(self, code_hash: str) -> PairingCode | None:
        taken = await self._returning(access.take_pairing_code(code_hash))
        return access.pairing_code_from_row(taken[0]) if taken else None

    async def drop_pairing_codes(self, before: float) -> int:
        return await self._write(access.drop_pairing_codes(before))

    async def pair_user(self, user: PairedUser) -> None:
        await self._write(access.pair_user(user))

    async def unpair_user(self, platform: str, user_id: str) -> bool:
        return await self._write(access.unpair_user(platform, user_id)) == 1

    async def paired_users(self, platform: str | None = None) -> list[PairedUser]:
        found = await self._read(*access.paired_users(platform))
        return [access.paired_user_from_row(row) for row in found]

    async def mark_paired_announced(self, platform: str, user_id: str) -> None:
        await self._update_one(access.mark_paired_announced(platform, user_id))

    async def session_settings(self, session_key: str) -> SessionSettings:
        found = await self._read(chat_settings.SESSION_SETTINGS, (session_key,))
        return chat_settings.settings_from_rows(found) if found else SessionSettings()

    async def put_session_settings(self, session_key: str, settings: SessionSettings) -> None:
        await self._write(chat_settings.put_session_settings(session_key, settings, time.time()))

    async def put_link_code(self, code: LinkCode) -> None:
        await self._write(access.put_link_code(code))

    async def take_link_code(self, code_hash: str) -> LinkCode | None:
        taken = await self._returning(access.take_link_code(code_hash))
        return access.link_code_from_row(taken[0]) if taken else None

    async def link_identity(self, platform: str, user_id: str, person: str) -> None:
        await self._write(access.link_identity(platform, user_id, person, time.time()))

    async def person_of(self, platform: str, user_id: str) -> str | None:
        found = await self._read(access.PERSON_OF, (platform, user_id))
        return str(found[0]["person"]) if found else None

    async def identities_of(self, person: str) -> list[tuple[str, str]]:
        found = await self._read(access.IDENTITIES_OF, (person,))
        return [(row["platform"], row["user_id"]) for row in found]

    async def identity_links(self) -> list[tuple[str, str, str]]:
        found = await self._read(access.IDENTITY_LINKS, ())
        return [(row["platform"], row["user_id"], row["person"]) for row in found]

    async def unlink_identity(self, platform: str, user_id: str) -> bool:
        return await self._write(access.unlink_identity(platform, user_id)) == 1

    # statements of feature modules (core/store/jobs.py) -------------------------
    async def run_statement(self, statement: Statement) -> int:
        """Run one writing statement, committed (fenced when under a fence); its row count."""
        return await self._write(statement)

    async def read_rows(self, sql: str, params: Params) -> list[Any]:
        return await self._read(sql, params)

    # plumbing ---------------------------------------------------------------
    def _open_pool(self) -> asyncpg.Pool:
        if self._closed:
            raise StoreError(f"store {self.display} is closed")
        return self.pool

    async def _read(self, sql: str, params: Params) -> list[Any]:
        pool = self._open_pool()
        with translated(self.dsn, "read"):
            found: list[Any] = await pool.fetch(pg.pg_sql(sql), *pg.pg_storable(params))
            return found

    async def _write(self, statement: Statement) -> int:
        """Run one writing statement (fenced when under a fence); its row count."""
        status = await self._run(statement, _execute)
        return _rowcount(status)

    async def _returning(self, statement: Statement) -> list[Any]:
        """Run one writing statement with ``RETURNING`` (fenced likewise); its rows."""
        return await self._run(statement, _fetch)

    async def _update_one(self, statement: Statement) -> None:
        if await self._write(statement._replace(doing=f"update {statement.doing}")) != 1:
            raise StoreError(f"{self.display}: no {statement.doing}")

    async def _update_each(self, statements: Sequence[Statement]) -> None:
        """Statements that must each change exactly one row, in one transaction (fenced
        likewise, shielded like every write): all kept, or none and ``StoreError`` "no
        <doing>" of the first that changed none."""
        pool = self._open_pool()
        await asyncio.shield(self._updated_each(pool, statements, current_fence()))

    async def _updated_each(
        self, pool: asyncpg.Pool, statements: Sequence[Statement], fence: Fence | None
    ) -> None:
        with translated(self.dsn, f"update {statements[0].doing}"):
            async with pool.acquire() as conn, conn.transaction():
                await guard(conn, fence)
                for statement in statements:
                    [(sql, params)] = pg.pg_steps(statement)
                    if _rowcount(await conn.execute(sql, *params)) != 1:
                        raise StoreError(f"{self.display}: no {statement.doing}")

    async def _run(self, statement: Statement, run: Run[T]) -> T:
        """The write, shielded: once sent it completes (or fails) whole, even when the
        caller is cancelled."""
        pool = self._open_pool()
        return await asyncio.shield(self._committed(pool, statement, run, current_fence()))

    async def _committed(
        self, pool: asyncpg.Pool, statement: Statement, run: Run[T], fence: Fence | None
    ) -> T:
        *before, (sql, params) = pg.pg_steps(statement)
        with translated(self.dsn, statement.doing):
            async with pool.acquire() as conn:
                if fence is None and not before:
                    return await run(conn, sql, params)
                async with conn.transaction():
                    await guard(conn, fence)
                    for step_sql, step_params in before:
                        await conn.execute(step_sql, *step_params)
                    return await run(conn, sql, params)


async def _execute(conn: asyncpg.Connection, sql: str, params: tuple[object, ...]) -> str:
    status: str = await conn.execute(sql, *params)
    return status


async def _fetch(conn: asyncpg.Connection, sql: str, params: tuple[object, ...]) -> list[Any]:
    rows: list[Any] = await conn.fetch(sql, *params)
    return rows


def _conforms(store: PgStore) -> Store:
    """Never called: mypy proves here that ``PgStore`` satisfies ``Store`` exactly."""
    return store


async def open_pg_store(url: str, *, process_id: str, pool_size: int = 10) -> PgStore:
    """Connect to ``url`` and migrate the database (:mod:`core.store.pg_migrations`).

    ``StoreUnavailable`` naming the masked URL when the server is unreachable or refuses
    connections; ``StoreError`` for a database that is not a CommonOS store or whose schema
    is newer than this code. The pool is closed again on any failure."""
    pool = await open_pool(url, pool_size)
    try:
        with translated(url, "migrate the store"):
            async with pool.acquire() as conn:
                await migrate(conn, mask_url(url))
    except BaseException:
        await pool.close()
        raise
    log.info("store opened at %s (process %s)", mask_url(url), process_id)
    return PgStore(pool, url, process_id)
