"""Discord messages and interactions as stored envelopes, and envelopes as events.

An :class:`Envelope` is what the durable inbox stores for one Discord message or
interaction: plain values only, so a replay after a restart needs no discord.py object.
:func:`event_of` turns an envelope (and where it is answered: a thread the adapter opened
for it, say) into the :class:`InboundEvent` the router reads.

Chats: a DM is ``dm``; a guild text channel is ``channel`` (one session per user, or
shared with ``group_sessions = "shared"``); a thread is ``thread``, one session shared by
its members, its channel id the chat. A message in a thread the bot opened counts as
addressed to the bot (no mention needed there).

Files: an envelope keeps its message's attachments, offered (:mod:`.files`), so a replay
hands the same ones on; a message with files and no text is a text event with ``""``.

Text is made valid where an envelope is built: a lone UTF-16 surrogate in any of its strings
(text, names, ids, file names) becomes U+FFFD (:func:`core.text.repair_fields`).

Text commands: ``/name`` is always a command (an unknown one is answered as such);
``!name`` only when ``name`` is one of ours, so ``!important`` stays text.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Literal

from adapters.base import ChatRef, ChatType, InboundEvent, Sender, SentMessage
from adapters.session_keys import SessionKeyRule
from core.attachments import Attachment
from core.text import repair_fields

PLATFORM = "discord"
EnvelopeKind = Literal["message", "command", "press"]
_COMMAND = re.compile(r"^([/!])([A-Za-z][\w-]{0,31})(?:@\S+)?(?:\s+([\s\S]*))?$")
THREAD_NAME = 100


@dataclass(frozen=True, slots=True)
class Envelope:
    """One inbound Discord item as stored (``id``: message or interaction snowflake)."""

    kind: EnvelopeKind
    id: str
    channel_id: str
    chat_type: ChatType
    author_id: str
    author_name: str
    author_bot: bool = False
    text: str = ""
    mentioned: bool = False
    reply_to_bot: bool = False
    bot_thread: bool = False
    """The message was said in a thread the bot opened."""
    command: str = ""
    args: str = ""
    custom_id: str = ""
    message_id: str = ""
    """For a press: the message whose button was pressed."""
    attachments: tuple[Attachment, ...] = ()

    def __post_init__(self) -> None:
        repair_fields(self)  # text made valid once, where it enters (core.text)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> Envelope:
        data = json.loads(raw)
        known = {f.name for f in fields(cls)}
        envelope = cls(**{k: v for k, v in data.items() if k in known})
        return replace(envelope, attachments=revive(envelope.attachments))


def revive(items: object) -> tuple[Attachment, ...]:
    """Attachments from their stored JSON objects."""
    if not isinstance(items, (list, tuple)):
        return ()
    return tuple(Attachment(**item) if isinstance(item, dict) else item for item in items)


def strip_mentions(text: str, bot_id: str) -> str:
    return re.sub(rf"<@!?{bot_id}>", " ", text).strip()


def parse_command(text: str, known: frozenset[str]) -> tuple[str, str] | None:
    """``(name, args)`` of a typed command, or None for ordinary text."""
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    prefix, name, args = match.group(1), match.group(2).lower(), match.group(3) or ""
    if prefix == "!" and name not in known:
        return None
    return name, args.strip()


def thread_name(text: str) -> str:
    """A thread's name from the first words of the message that opened it."""
    words = " ".join(text.split())
    if not words:
        return "Conversation"
    if len(words) <= THREAD_NAME:
        return words
    return words[: THREAD_NAME - 1].rsplit(" ", 1)[0] + "…"


def _source(envelope: Envelope) -> SentMessage | None:
    """The user's message (in its own channel, also when its session moved to a thread
    started from it); none for a press or a command (a slash command has no message)."""
    if envelope.kind != "message" or not envelope.id.isdigit():
        return None
    return SentMessage(ChatRef(PLATFORM, envelope.channel_id), envelope.id)


def event_of(
    envelope: Envelope, key_rule: SessionKeyRule, chat_id: str | None = None
) -> InboundEvent:
    """The event for ``envelope``; ``chat_id`` overrides where it lives (a new thread)."""
    moved = chat_id is not None and chat_id != envelope.channel_id
    where = chat_id or envelope.channel_id
    chat_type: ChatType = "thread" if moved else envelope.chat_type
    chat = ChatRef(PLATFORM, where)
    base = InboundEvent(
        kind="text",
        platform=PLATFORM,
        update_id=envelope.id,
        chat=chat,
        chat_type=chat_type,
        sender=Sender(envelope.author_id, envelope.author_name, envelope.author_bot),
        session_key=key_rule(PLATFORM, chat_type, where, user_id=envelope.author_id),
        text=envelope.text,
        mentioned=envelope.mentioned or envelope.bot_thread or moved,
        reply_to_bot=envelope.reply_to_bot,
        attachments=envelope.attachments,
        source=_source(envelope),
    )
    if envelope.kind == "press":
        message = SentMessage(chat, envelope.message_id)
        return replace(
            base, kind="button", button_data=envelope.custom_id, message=message,
            press_id=envelope.id,
        )  # fmt: skip
    if envelope.kind == "command":
        return replace(base, kind="command", command=envelope.command, args=envelope.args)
    return base
