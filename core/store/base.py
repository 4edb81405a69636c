"""The store port.

Callers depend on the ``Store`` Protocol only, so a PostgreSQL backend can be added
without touching them. Contract for every implementation:

* one writer: writes are serialised; each method that writes commits before returning;
* a turn is never seen half-written: ``finish_turn`` and the messages of a turn become
  visible atomically with respect to readers of ``load_active_messages``
  (messages of a turn are written as they happen, but only turns that are finished or
  running are ever loaded — nothing is rolled back behind a reader's back);
* ``resolve_approval`` is compare-and-set: it succeeds once, for the first resolver;
* ``enqueue_inbound`` is idempotent per ``(platform, update_id)``.

Times are UNIX seconds (float). Ids are strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from core.store.records import (
    ActiveSession,
    ApprovalCard,
    ApprovalRecord,
    AttachmentRecord,
    AttachmentState,
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
    StoredMessage,
    StreamRecord,
    ToolCallRecord,
    ToolCallStatus,
    TurnRecord,
    chunk_key,
    turn_of_chunk,
)
from core.types import ApprovalState, ChatMessage, Content, ExitReason, TurnStatus

__all__ = [
    "ActiveSession",
    "ApprovalCard",
    "ApprovalRecord",
    "AttachmentRecord",
    "AttachmentState",
    "DeadLetter",
    "InboundRecord",
    "InboundState",
    "LinkCode",
    "OutboxChunk",
    "PairedUser",
    "PairingCode",
    "QueuedFile",
    "SessionRecord",
    "SessionSettings",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "StoredMessage",
    "StreamRecord",
    "ToolCallRecord",
    "ToolCallStatus",
    "TurnRecord",
    "chunk_key",
    "turn_of_chunk",
]


class StoreError(Exception):
    """The store cannot be opened or used (not SQLite, newer schema, corrupt)."""


class StoreUnavailable(StoreError):
    """The store cannot write *right now* (disk full, read-only file, I/O error, locked by
    another process): what was given was fine, and the same write is expected to succeed
    once storage is back. Callers wait and retry; they never treat the item as poison."""


class Store(Protocol):
    """Everything the engine and gateway persist."""

    async def close(self) -> None: ...

    # sessions ---------------------------------------------------------------
    async def get_active_session(self, key: str) -> SessionRecord | None:
        """The open (not ended) session for ``key``, if any."""
        ...

    async def create_session(self, key: str, profile: str) -> SessionRecord: ...

    async def end_session(self, session_id: str) -> None:
        """Close a session (``/new``); the next message to its key starts a new one."""
        ...

    async def touch_session(self, session_id: str) -> None: ...

    async def save_session_prompt(
        self, session_id: str, *, frozen_context: str, system_prompt: str, fingerprint: str
    ) -> None: ...

    async def load_active_session(self, key: str) -> ActiveSession | None:
        """The open session for ``key`` with its active messages, oldest first, read
        together (one call on SQLite's connection thread); None when no session is open."""
        ...

    # messages ---------------------------------------------------------------
    async def load_active_messages(self, session_id: str) -> list[StoredMessage]:
        """Active messages of the session, oldest first."""
        ...

    async def append_message(
        self,
        session_id: str,
        turn_id: str | None,
        message: ChatMessage,
        *,
        origin: str | None = None,
        also: tuple[str, ...] = (),
    ) -> int:
        """Store one message; returns its id (monotonic within the store).

        ``origin`` names the inbound update a user message came from, so a replay of that
        update can find it (:meth:`find_message_by_origin`) instead of storing it again;
        ``also`` names the updates merged into the message (``debounce_ms``), by any of
        which it is found as well."""
        ...

    async def find_message_by_origin(self, session_id: str, origin: str) -> StoredMessage | None:
        """The session's earliest message stored with ``origin`` (active or not), if any."""
        ...

    async def update_message_content(self, message_id: int, content: Content) -> None:
        """Replace a stored message's content (str or list of blocks, kept as given)."""
        ...

    async def deactivate_messages(self, message_ids: Sequence[int]) -> None:
        """Mark messages inactive (compaction); they stay stored."""
        ...

    # turns ------------------------------------------------------------------
    async def start_turn(self, session_id: str, turn_id: str) -> TurnRecord: ...

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
        """Store the turn's final status. With ``session_id`` (the turn's session), that
        session's last activity is set to the same moment in the same transaction: a
        turn's close is one write, kept whole or not at all (``StoreError`` "no turn ..."
        or "no session ..." when either is missing)."""
        ...

    async def get_turn(self, turn_id: str) -> TurnRecord | None: ...

    async def list_turns(self, session_id: str) -> list[TurnRecord]: ...

    async def fail_running_turns(self, reason: str) -> int:
        """On start-up: mark turns left ``running`` by a crash as failed; returns count."""
        ...

    # tool calls and approvals -----------------------------------------------
    async def record_tool_call(self, record: ToolCallRecord) -> None:
        """Store a call that has already ended, in one write."""
        ...

    async def open_tool_call(self, record: ToolCallRecord) -> int:
        """Store a call as it begins (``record.status``, usually ``requested``); returns the
        row's sequence number for :meth:`set_tool_call_status` and :meth:`finish_tool_call`."""
        ...

    async def set_tool_call_status(
        self, seq: int, status: ToolCallStatus, *, approval_id: str | None = None
    ) -> None:
        """Move an open call on (e.g. to ``awaiting_approval``, ``started``)."""
        ...

    async def finish_tool_call(self, seq: int, record: ToolCallRecord) -> None:
        """Write an open call's end: arguments, result, error flag, finish time, approval and
        final status from ``record`` (its ids and start time are kept as opened)."""
        ...

    async def list_tool_calls(self, turn_id: str) -> list[ToolCallRecord]: ...

    async def create_approval(self, record: ApprovalRecord) -> None: ...

    async def resolve_approval(
        self, approval_id: str, state: ApprovalState, resolved_by: str | None
    ) -> bool:
        """Compare-and-set from ``pending``; True only for the first resolver."""
        ...

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None: ...

    async def set_approval_card(
        self,
        approval_id: str,
        platform: str,
        chat_id: str,
        thread_id: str | None,
        message_id: str,
    ) -> None:
        """Remember where the approval's card was shown (read back as ``record.card``)."""
        ...

    async def pending_approvals(self, session_key: str | None = None) -> list[ApprovalRecord]:
        """Pending approvals, oldest first (optionally of one session key)."""
        ...

    # inbound queue ----------------------------------------------------------
    async def enqueue_inbound(self, record: InboundRecord) -> bool:
        """Insert if new; False when ``(platform, update_id)`` is already known."""
        ...

    async def set_inbound_state(
        self, platform: str, update_id: str, state: InboundState
    ) -> None: ...

    async def unfinished_inbound(self, platform: str) -> list[InboundRecord]:
        """Inbound items not yet ``done`` (pending or processing), oldest first."""
        ...

    async def get_inbound(self, platform: str, update_id: str) -> InboundRecord | None: ...

    # command syncs ----------------------------------------------------------
    async def synced_commands(self, platform: str, scope: str) -> str | None:
        """The digest of the command set last registered with ``platform`` for ``scope``
        (a guild id, or ``"global"``); None when none was."""
        ...

    async def set_synced_commands(self, platform: str, scope: str, digest: str) -> None:
        """``digest``'s command set is now the one registered for ``scope`` (replaces the
        previous one)."""
        ...

    # outbox -----------------------------------------------------------------
    async def put_outbox(self, chunks: Sequence[OutboxChunk]) -> list[OutboxChunk]:
        """Store the chunks of one turn not stored yet; returns every stored chunk of that
        turn, in order (an earlier run's texts and sent marks win)."""
        ...

    async def mark_outbox_started(self, turn_id: str, index: int) -> None:
        """A send of chunk ``index`` of ``turn_id`` is about to begin (the first such
        time is kept)."""
        ...

    async def mark_outbox_sent(self, turn_id: str, index: int, message_id: str) -> None:
        """Chunk ``index`` of ``turn_id`` arrived as ``message_id``."""
        ...

    # live streams -----------------------------------------------------------
    async def put_stream(self, record: StreamRecord) -> None:
        """The session's streamed answer is being written into ``record.message_id``
        (replaces the session's earlier record)."""
        ...

    async def stream_of(self, session_key: str) -> StreamRecord | None:
        """The message the session's last stream was written into, while kept."""
        ...

    async def drop_stream(self, session_key: str, message_id: str) -> None:
        """The stream of ``message_id`` ended (its answer delivered, or it was cleared)."""
        ...

    # attachments ------------------------------------------------------------
    async def put_attachment(self, record: AttachmentRecord) -> None:
        """Write (or overwrite) the row of ``(record.origin, record.index)``."""
        ...

    async def attachments_of(self, origin: str) -> list[AttachmentRecord]:
        """The rows of one inbound message, by index."""
        ...

    async def link_attachments(self, origin: str, message_id: int) -> None:
        """The stored user message ``message_id`` is the one ``origin``'s files came with."""
        ...

    # files sent (outbox for files) ------------------------------------------
    async def queue_file(self, queued: QueuedFile) -> bool:
        """Keep a file to send; False when its key is already queued (nothing changes)."""
        ...

    async def unsent_files(self, session_id: str) -> list[QueuedFile]:
        """The session's queued files not yet arrived nor given up, oldest first."""
        ...

    async def unsent_file_sessions(self) -> list[str]:
        """The keys of the sessions holding files not yet arrived nor given up (one read at
        start-up: files a previous run left)."""
        ...

    async def mark_file_started(self, key: str) -> None:
        """An upload of ``key`` is about to begin (the first such time is kept)."""
        ...

    async def mark_file_sent(self, key: str, message_id: str) -> None: ...

    async def mark_file_failed(self, key: str, reason: str) -> None:
        """Give the file up (the platform refused it for good); it is not sent again."""
        ...

    # pairing ----------------------------------------------------------------
    async def put_pairing_code(self, code: PairingCode) -> None:
        """Keep ``code`` (replacing any code the same user had on that platform)."""
        ...

    async def pairing_codes(self, platform: str | None = None) -> list[PairingCode]:
        """Codes not taken yet (expired ones included: the caller compares with its clock),
        oldest first."""
        ...

    async def take_pairing_code(self, code_hash: str) -> PairingCode | None:
        """Remove and return the code with this hash (None: no such code)."""
        ...

    async def drop_pairing_codes(self, before: float) -> int:
        """Remove codes that expired before ``before``; how many."""
        ...

    async def pair_user(self, user: PairedUser) -> None:
        """Let ``user`` in (replaces an earlier pairing of the same user)."""
        ...

    async def unpair_user(self, platform: str, user_id: str) -> bool: ...

    async def paired_users(self, platform: str | None = None) -> list[PairedUser]: ...

    async def mark_paired_announced(self, platform: str, user_id: str) -> None: ...

    # per-session settings ---------------------------------------------------
    async def session_settings(self, session_key: str) -> SessionSettings:
        """The settings a chat made for ``session_key`` (all None when none)."""
        ...

    async def put_session_settings(self, session_key: str, settings: SessionSettings) -> None: ...

    # identity links ---------------------------------------------------------
    async def put_link_code(self, code: LinkCode) -> None:
        """Keep ``code`` (replacing any code the same identity had on that platform)."""
        ...

    async def take_link_code(self, code_hash: str) -> LinkCode | None: ...

    async def link_identity(self, platform: str, user_id: str, person: str) -> None:
        """``platform``'s ``user_id`` is ``person`` (replaces an earlier link of it)."""
        ...

    async def person_of(self, platform: str, user_id: str) -> str | None: ...

    async def identities_of(self, person: str) -> list[tuple[str, str]]:
        """Every (platform, user id) linked as ``person``."""
        ...

    async def identity_links(self) -> list[tuple[str, str, str]]:
        """Every link as (platform, user id, person): read once at start, so a message is
        routed without a store query (gateway/control/links.py)."""
        ...

    async def unlink_identity(self, platform: str, user_id: str) -> bool: ...

    # dead letters -----------------------------------------------------------
    async def add_dead_letter(self, letter: DeadLetter) -> int | None:
        """Keep ``letter``; its new id, or None when ``(platform, item_id)`` is already kept."""
        ...

    async def list_dead_letters(self, platform: str | None = None) -> list[DeadLetter]:
        """Dead letters (optionally of one platform), oldest first."""
        ...

    async def drop_dead_letter(self, letter_id: int) -> bool:
        """Remove one dead letter; False when there is none with ``letter_id``."""
        ...
