"""Outbound calls as values: what the gateway asks a platform to do.

Every intent is one frozen value (docs/architecture.md, "The outbound pipeline"). The
gateway runs each through one fold of middlewares built once per bot (schedule → redact →
count) that ends in the adapter's single ``perform(call)``, the way an httpx request
ends in a transport's ``handle_async_request``::

    Send(chat, text, buttons, markup, key)   → SentMessage   a new message
    SendFile(chat, file, caption, key)       → SentMessage   a file (photo or document)
    Edit(message, text, buttons, markup)     → None          replace a message's text
    Delete(message)                          → None
    AnswerPress(event, text)                 → None          acknowledge a button press
    Typing(chat)                             → None          a typing indicator, once
    LiveText(chat, text, mode)               → None          a streaming reply's text
    React(message, emoji)                    → None          a status reaction on a message

``text`` is in the platform's ``Capabilities.markup`` unless ``markup`` is False (plain
text, the fallback when markup is refused). ``key`` on a :class:`Send` is the outbox
chunk's id: a platform with an idempotency mechanism uses it so that the same chunk sent
twice (a crash while the first send was in flight) shows once.

Each value says how it is scheduled: its ``priority`` (:class:`Priority`) and, where a
newer call makes an older waiting one pointless, its ``coalesce`` key (the older is
dropped). A middleware returns ``replace(call, ...)`` to change a call; nothing wraps the
adapter.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from adapters.events import ButtonRows, ChatRef, InboundEvent, SentMessage
from core.attachments import OutgoingFile

LiveMode = Literal["append", "replace", "seal"]
"""``append`` adds to the chat's live reply, ``replace`` makes it the text ("" removes it),
``seal``: the turn ended, the next reply sent takes the live reply's place."""


class Priority(IntEnum):
    """Order among waiting calls of one bot (lower first)."""

    URGENT = 0
    """Stop notices, approval cards, button answers."""
    REPLY = 1
    """Final replies (and a progress message edited into one)."""
    PROGRESS = 2
    """Progress states."""
    STREAM = 3
    """A streamed answer's text (drafts, chat streams, edits in place): the lowest a turn
    waits for, coalesced to the newest text (docs/architecture.md, "Streaming")."""
    CLEANUP = 4
    """Deletes, typing and status reactions: never awaited by a turn."""


@dataclass(frozen=True, slots=True)
class Send:
    chat: ChatRef
    text: str
    buttons: ButtonRows = ()
    markup: bool = True
    key: str | None = None
    """The outbox chunk id (an idempotency key), when the text is a stored reply chunk."""
    in_flight_since: float | None = None
    """An earlier send of ``key`` began at this time (epoch seconds) and was never known to
    arrive (a crash in its window): a platform that can look for it first does (Slack)."""
    priority: Priority = Priority.REPLY
    coalesce: Hashable | None = None


@dataclass(frozen=True, slots=True)
class SendFile:
    """Upload ``file`` (its bytes are read from ``file.path`` when the call is made) with
    ``caption`` (plain text, already redacted). ``key`` is the outbox row's id, the
    platform's idempotency key where it has one (as for :class:`Send`)."""

    chat: ChatRef
    file: OutgoingFile
    caption: str = ""
    key: str | None = None
    in_flight_since: float | None = None
    priority: Priority = Priority.REPLY
    coalesce: Hashable | None = None


@dataclass(frozen=True, slots=True)
class Edit:
    message: SentMessage
    text: str
    buttons: ButtonRows = ()
    markup: bool = True
    priority: Priority = Priority.REPLY
    coalesce: Hashable | None = None

    @property
    def chat(self) -> ChatRef:
        return self.message.chat


@dataclass(frozen=True, slots=True)
class Delete:
    message: SentMessage
    priority: Priority = Priority.CLEANUP
    coalesce: Hashable | None = None

    @property
    def chat(self) -> ChatRef:
        return self.message.chat


@dataclass(frozen=True, slots=True)
class AnswerPress:
    event: InboundEvent
    text: str | None = None
    priority: Priority = Priority.URGENT
    coalesce: Hashable | None = None

    @property
    def chat(self) -> ChatRef:
        return self.event.chat


@dataclass(frozen=True, slots=True)
class Typing:
    chat: ChatRef
    priority: Priority = Priority.CLEANUP
    coalesce: Hashable | None = None


@dataclass(frozen=True, slots=True)
class LiveText:
    chat: ChatRef
    text: str
    mode: LiveMode
    priority: Priority = Priority.PROGRESS
    coalesce: Hashable | None = None


@dataclass(frozen=True, slots=True)
class React:
    """Mark ``message`` (a user's message: its chat and platform id) with ``emoji``, one
    of :data:`STATUS_EMOJI` (docs/architecture.md, "Status reactions"). Each adapter
    shows it as its platform allows (Telegram replaces the bot's reaction and takes only
    its own emoji list; Slack takes names); a refusal is logged, never fatal. It runs at
    ``CLEANUP`` priority, charged as ``react`` (to the chat's window where the platform
    counts it there: Telegram, Slack), and no turn waits for it."""

    message: SentMessage
    emoji: str
    priority: Priority = Priority.CLEANUP
    coalesce: Hashable | None = None

    @property
    def chat(self) -> ChatRef:
        return self.message.chat


WORKING, DONE, FAILED = "👀", "✅", "❌"
STATUS_EMOJI = (WORKING, DONE, FAILED)
"""The status reactions: a turn started, ended well, ended otherwise."""


Call = Send | SendFile | Edit | Delete | AnswerPress | Typing | LiveText | React
"""Every outbound call; ``call.chat`` is where it goes."""
