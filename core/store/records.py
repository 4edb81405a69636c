"""The values the store keeps and returns (docs/architecture.md): frozen records of
sessions, messages, turns, tool calls, approvals, the inbound queue, the outbox, dead
letters, attachments, files sent, pairing, session settings and identity links.

``core.store.base`` re-exports every name here, so callers may import from either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

from core.attachments import Attachment, OutgoingFile
from core.types import ApprovalState, ChatMessage, ExitReason, TurnStatus

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


class ActiveSession(NamedTuple):
    """A key's open session and its active messages, oldest first, read together
    (``Store.load_active_session``)."""

    session: SessionRecord
    messages: list[StoredMessage]


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


@dataclass(frozen=True, slots=True)
class StreamRecord:
    """The message a session's streamed answer is being written into, kept from its first
    send until the answer is delivered or the stream cleared: a process killed meanwhile
    leaves it, and the turn that runs again after the restart takes that message's place
    instead of leaving a cut copy beside a second one (docs/architecture.md §13)."""

    session_key: str
    platform: str
    chat_id: str
    thread_id: str | None
    message_id: str
