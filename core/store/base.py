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
from dataclasses import dataclass
from typing import Literal, Protocol

from core.attachments import Attachment, OutgoingFile
from core.types import ApprovalState, ChatMessage, Content, ExitReason, TurnStatus

InboundState = Literal["pending", "processing", "done", "failed"]

ToolCallStatus = Literal[
    "requested",
    "awaiting_approval",
    "started",
    "finished",
    "blocked",
    "denied",
    "timed_out",
    "cancelled",
]
"""How far a tool call got: ``requested`` (recorded, deciding), ``awaiting_approval``
(a person was asked), ``started`` (its handler runs), then how it ended: ``finished`` (ran
to a result, possibly an error), ``blocked`` (a policy refused it), ``denied`` or
``timed_out`` (its approval), ``cancelled`` (the turn stopped). A row of a dead turn left
``requested`` or ``awaiting_approval`` never ran; one left ``started`` has an unknown
outcome."""


class StoreError(Exception):
    """The store cannot be opened or used (not SQLite, newer schema, corrupt)."""


class StoreUnavailable(StoreError):
    """The store cannot write *right now* (disk full, read-only file, I/O error, locked by
    another process): what was given was fine, and the same write is expected to succeed
    once storage is back. Callers wait and retry; they never treat the item as poison."""


@dataclass(frozen=True, slots=True)
class SessionRecord:
    id: str
    key: str
    profile: str
    created_at: float
    last_active_at: float
    frozen_context: str | None = None
    system_prompt: str | None = None
    """The cached stable+context prompt, reused byte-identical across turns."""
    prompt_fingerprint: str | None = None
    """Hash of the runtime (model, toolset, SOUL.md) the cached prompt was built for."""
    ended_at: float | None = None


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    session_id: str
    turn_id: str | None
    message: ChatMessage
    created_at: float
    active: bool = True
    origin: str | None = None
    """The inbound update the message came from (``"<platform>:<update id>"``), if any."""


@dataclass(frozen=True, slots=True)
class TurnRecord:
    id: str
    session_id: str
    started_at: float
    status: TurnStatus = "running"
    finished_at: float | None = None
    exit_reason: ExitReason | None = None
    iterations: int = 0
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    call_id: str
    turn_id: str
    session_id: str
    name: str
    arguments: str
    result: str
    is_error: bool
    started_at: float
    finished_at: float | None
    """None while the call is still open (``status`` is one of the open states)."""
    approval_id: str | None = None
    approval_outcome: ApprovalState | None = None
    status: ToolCallStatus = "finished"


@dataclass(frozen=True, slots=True)
class ApprovalCard:
    """Where an approval's card was shown, so a later run can still edit it."""

    platform: str
    chat_id: str
    thread_id: str | None
    message_id: str


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    id: str
    session_id: str
    session_key: str
    turn_id: str
    tool: str
    arguments: str
    prompt: str
    requested_at: float
    state: ApprovalState = "pending"
    requested_by: str | None = None
    resolved_by: str | None = None
    resolved_at: float | None = None
    card: ApprovalCard | None = None
    """Set by :meth:`Store.set_approval_card` once the card is shown; never by ``create``."""


@dataclass(frozen=True, slots=True)
class InboundRecord:
    platform: str
    update_id: str
    session_key: str
    payload: str
    received_at: float
    state: InboundState = "pending"


def chunk_key(turn_id: str, index: int) -> str:
    """The id of chunk ``index`` of ``turn_id``'s reply (``"<turn id>.<index>"``)."""
    return f"{turn_id}.{index}"


def turn_of_chunk(key: str) -> str:
    """The turn id in a :func:`chunk_key`."""
    return key.rpartition(".")[0]


@dataclass(frozen=True, slots=True)
class OutboxChunk:
    """One outgoing chunk of a turn's reply, stored before it is sent.

    ``message_id`` is the platform's id of the message once it arrived (``None``: not yet
    known to be sent). ``started_at``: when its first send began (marked just before the
    call, seconds since the epoch); a chunk started but not sent was in flight when the
    process stopped, and the platform may have it (docs/architecture.md, "Exactly once").
    Keyed by ``(turn_id, index)``: a turn's chunks are stored once."""

    turn_id: str
    index: int
    platform: str
    chat_id: str
    thread_id: str | None
    text: str
    markup: bool
    message_id: str | None = None
    started_at: float | None = None

    @property
    def key(self) -> str:
        """The chunk's id, stable across restarts: the idempotency key its sends carry."""
        return chunk_key(self.turn_id, self.index)

    @property
    def in_flight(self) -> bool:
        """A send began and was never marked arrived (a crash in the call's window)."""
        return self.started_at is not None and self.message_id is None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An inbound item that could not be taken in (unreadable, or refused by the store after
    a bounded number of attempts), kept with its raw form for an operator to look at."""

    platform: str
    item_id: str
    """The platform's id of the item (e.g. a Telegram ``update_id``), or a digest of it."""
    raw: str
    """The item as received (JSON text where the platform speaks JSON)."""
    error: str
    attempts: int
    created_at: float
    id: int = 0
    """Assigned by the store (:meth:`Store.add_dead_letter`); 0 before that."""


AttachmentState = Literal["downloading", "saved", "failed"]


@dataclass(frozen=True, slots=True)
class AttachmentRecord:
    """One file of one inbound message (docs/attachments.md): ``origin`` is the message's
    update (``"<platform>:<update id>"``), ``index`` its place among the message's files.
    A row is written ``downloading`` before the first byte is fetched and ``saved`` once the
    file is in the workspace (with its path, size and sha256), so a replayed update finds
    its files saved and downloads none again. ``message_id`` links it to the stored user
    message once that exists."""

    origin: str
    index: int
    session_key: str
    attachment: Attachment
    state: AttachmentState
    error: str = ""
    message_id: int | None = None


@dataclass(frozen=True, slots=True)
class QueuedFile:
    """A file the agent sent (``send_file``), kept until it arrived: the outbox for files.
    ``message_id`` is set once it arrived, ``started_at`` just before each upload (an
    upload started and never marked was in flight when the process stopped)."""

    session_id: str
    turn_id: str
    platform: str
    chat_id: str
    thread_id: str | None
    file: OutgoingFile
    queued_at: float
    message_id: str | None = None
    started_at: float | None = None
    failed: str = ""
    """Why it was given up (the platform refused it for good); "" while it may still go."""

    @property
    def in_flight(self) -> bool:
        return self.started_at is not None and self.message_id is None


@dataclass(frozen=True, slots=True)
class PairingCode:
    """A one-time code a stranger got in a DM (``[access] pairing``, docs/pairing.md):
    stored by its hash (``code_hash``: sha256 hex of the code), never the code itself."""

    code_hash: str
    platform: str
    user_id: str
    name: str
    chat_id: str
    created_at: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class PairedUser:
    """A user an owner let in from the chat, the dashboard or ``commonos pair approve``.
    ``announced`` is False until the user was told they are in."""

    platform: str
    user_id: str
    name: str
    paired_at: float
    paired_by: str
    announced: bool = False


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """What a chat set for its session (``/model``, ``/busy``, ``/progress``,
    ``/verbose``); None: the profile's own."""

    model: str | None = None
    busy: str | None = None
    progress: str | None = None
    verbose: bool | None = None


@dataclass(frozen=True, slots=True)
class LinkCode:
    """A short-lived ``/link`` code (by its hash) one identity made to join another."""

    code_hash: str
    platform: str
    user_id: str
    created_at: float
    expires_at: float


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
    ) -> int:
        """Store one message; returns its id (monotonic within the store).

        ``origin`` names the inbound update a user message came from, so a replay of that
        update can find it (:meth:`find_message_by_origin`) instead of storing it again."""
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
    ) -> None: ...

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
        routed without a store query (gateway/links.py)."""
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
