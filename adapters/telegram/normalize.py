"""PTB ``Update`` → :class:`InboundEvent`.

Chat types: ``private`` is a DM; a message in a forum topic (``is_topic_message``) is a
thread whose key is shared by its members; other ``group``/``supergroup`` messages are
group messages; ``channel`` is a channel. The session key comes from a
:class:`adapters.session_keys.SessionKeyRule` passed in by the composition root (the
configured strategy); :data:`default_session_key` is that rule with the default strategy:
per chat in DMs, per user in groups and channels, shared in topics.

Commands are ``/name[@bot] args``; a command addressed to another bot is not ours and is
dropped (``None``), as are updates that carry nothing we handle (stickers, joins, ...).

A message with a photo, document, voice note, audio, video, video note or animation carries
it as an offered attachment (:mod:`adapters.telegram.files`); its caption is the text ("" when
it has none) and it is always kind ``text``: a caption starting with ``/new`` is not a
command, so the file always reaches the turn (send the command on its own to run it).
Mentions of the bot count in a caption as in a text.

The ``stopped_message_generation`` update (Bot API 10.3: the user pressed Stop on a draft,
:mod:`adapters.telegram.drafts`) is not typed by python-telegram-bot 22.8: its fields are in
``Update.api_kwargs``. It becomes a ``stop`` event whose ``stream_id`` is the ``draft_id``,
sent by the private chat's user; whether that draft is still live is decided when the event
is handed over (:mod:`adapters.telegram.inbox`), not here.

Text is made valid here, once (:func:`valid_update`): a lone UTF-16 surrogate anywhere in
an update (a text, a caption, a name, a string id) becomes U+FFFD before anything is read.

A chat's kind is taken only from a valid ``chat.type`` (one of :data:`CHAT_TYPES`, a
string): any other value raises :class:`MalformedUpdate`, so the update becomes a dead
letter (:mod:`adapters.telegram.inbox`) and changes nothing about its chat — neither its
session nor how its replies are paced (:class:`gateway.outbound.scheduler.OutboundScheduler`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import TypeGuard

from telegram import Bot, CallbackQuery, Chat, Message, MessageEntity, Update, User

from adapters.base import ChatRef, ChatType, InboundEvent, Sender, SentMessage, SessionKey
from adapters.session_keys import KeyStrategy, SessionKeyRule, key_rule
from adapters.telegram.files import attachments_of
from core.text import valid_json

PLATFORM = "telegram"
STOP_UPDATE = "stopped_message_generation"
"""The update a draft's Stop button sends (Bot API 10.3), read from ``Update.api_kwargs``."""
CHAT_TYPES = frozenset({Chat.PRIVATE, Chat.GROUP, Chat.SUPERGROUP, Chat.CHANNEL})
"""The values of ``chat.type`` the Bot API defines."""
_COMMAND = re.compile(r"^/([A-Za-z0-9_]{1,64})(?:@([A-Za-z0-9_]+))?(?:\s+(.*))?$", re.DOTALL)


default_session_key: SessionKeyRule = key_rule(KeyStrategy())
"""The default rule: :func:`adapters.session_keys.session_key` with the default strategy."""


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who we are on Telegram: needed for mentions, replies and ``/cmd@bot``."""

    id: int
    username: str


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    name: str
    target: str | None
    args: str


def parse_command(text: str) -> ParsedCommand | None:
    """``/Name@bot  rest`` → name lower-cased, the addressed bot, the rest stripped."""
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    name, target, args = match.groups()
    return ParsedCommand(name.lower(), target, (args or "").strip())


class MalformedUpdate(ValueError):
    """An update whose fields do not have the values the Bot API defines: unreadable."""


def chat_type_of(chat: Chat, message: Message | None) -> ChatType:
    """Our kind of ``chat``; raises :class:`MalformedUpdate` for a ``chat.type`` that is not
    one of :data:`CHAT_TYPES` (a list, a dict, ``"supergroup "``, ...)."""
    if not isinstance(chat.type, str) or chat.type not in CHAT_TYPES:
        raise MalformedUpdate(
            f"chat {chat.id!r}: chat.type {chat.type!r} is not one of "
            f"{', '.join(sorted(CHAT_TYPES))}"
        )
    if chat.type == Chat.PRIVATE:
        return "dm"
    if chat.type == Chat.CHANNEL:
        return "channel"
    if message is not None and message.is_topic_message and message.message_thread_id:
        return "thread"
    return "group"


def chat_ref_of(chat: Chat, message: Message | None, chat_type: ChatType) -> ChatRef:
    """Where to answer; ``chat_type`` is :func:`chat_type_of` of the same chat and message."""
    thread = None
    if chat_type == "thread" and message is not None:
        thread = str(message.message_thread_id)
    return ChatRef(PLATFORM, str(chat.id), thread)


def sender_of(user: User | None, message: Message | None) -> Sender:
    """Who sent it; a bot when the user is one or a business account's bot wrote it
    (``sender_business_bot``). ``via_bot`` (a person's inline-bot message) is the person's."""
    business_bot = message.sender_business_bot if message is not None else None
    if business_bot is not None:
        return Sender(str(business_bot.id), business_bot.username or str(business_bot.id), True)
    if user is not None:
        return Sender(str(user.id), user.full_name or user.username or str(user.id), user.is_bot)
    chat = message.sender_chat if message is not None else None
    if chat is not None:
        return Sender(str(chat.id), chat.title or chat.username or str(chat.id))
    return Sender("unknown", "unknown")


def is_mentioned(message: Message, bot: BotIdentity) -> bool:
    """An ``@bot`` mention entity, or a text mention of the bot's user (in the text, or in
    the caption of a media message).

    Entities whose offsets do not fit the text (one inside an emoji's surrogate pair, say)
    cannot be read: such a message counts as not mentioning the bot."""
    handle = f"@{bot.username}".lower()
    try:
        entities = message.parse_entities() if message.text else message.parse_caption_entities()
    except ValueError:  # UnicodeDecodeError: an offset inside a surrogate pair
        return False
    for entity, text in entities.items():
        if entity.type == MessageEntity.MENTION and text.lower() == handle:
            return True
        if entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == bot.id:
            return True
    return False


def is_reply_to_bot(message: Message, bot: BotIdentity) -> bool:
    """A reply to one of our messages (the implicit reply to a topic's header is not)."""
    replied = message.reply_to_message
    if replied is None or replied.forum_topic_created is not None:
        return False
    return replied.from_user is not None and replied.from_user.id == bot.id


class Normalizer:
    """Turns updates into events for one bot identity and key strategy."""

    def __init__(self, bot: BotIdentity, key_rule: SessionKeyRule = default_session_key) -> None:
        self.bot = bot
        self.key_rule = key_rule

    def event(self, update: Update, raw: str | None = None) -> InboundEvent | None:
        """The event for ``update``, or ``None`` when it is nothing for us; raises
        :class:`MalformedUpdate` when its chat's type is not one the Bot API defines.
        Read from :func:`valid_update`, so no string of the event holds a lone surrogate
        (``raw``: the update's whole JSON when the caller has it, :func:`valid_update`)."""
        update = valid_update(update, raw)
        if update.callback_query is not None:
            return self._button(update.update_id, update.callback_query)
        if update.message is not None:
            return self._message(update.update_id, update.message)
        if STOP_UPDATE in update.api_kwargs:
            return self._stop(update.update_id, update.api_kwargs[STOP_UPDATE])
        return None

    def session_key(self, update: Update) -> str:
        """The canonical session key string of ``update`` (``""`` when it has none)."""
        event = self.event(update)
        return str(event.session_key) if event is not None else ""

    def _key(self, chat_type: ChatType, chat: ChatRef, sender: Sender) -> SessionKey:
        return self.key_rule(
            PLATFORM, chat_type, chat.chat_id, user_id=sender.id, thread_id=chat.thread_id
        )

    def _message(self, update_id: int, message: Message) -> InboundEvent | None:
        chat_type = chat_type_of(message.chat, message)  # validated even when we ignore it
        text = message.text or message.caption or ""
        # a message with text carries no media (a media message's words are its caption)
        attachments = () if message.text else attachments_of(message)
        if not text and not attachments:
            return None
        if message.from_user is not None and message.from_user.id == self.bot.id:
            return None  # our own message: never a turn, whatever allow_bots says
        chat = chat_ref_of(message.chat, message, chat_type)
        sender = sender_of(message.from_user, message)
        has_entities = bool(message.entities or message.caption_entities)  # a mention is one
        is_reply = message.reply_to_message is not None
        base = InboundEvent(
            kind="text",
            platform=PLATFORM,
            update_id=str(update_id),
            chat=chat,
            chat_type=chat_type,
            sender=sender,
            session_key=self._key(chat_type, chat, sender),
            text=text,
            mentioned=has_entities and is_mentioned(message, self.bot),
            reply_to_bot=is_reply and is_reply_to_bot(message, self.bot),
            attachments=attachments,
            source=SentMessage(chat, str(message.message_id)),
        )
        is_command = not attachments and text.lstrip().startswith("/")
        return self._as_command(base) if is_command else base

    def _as_command(self, event: InboundEvent) -> InboundEvent | None:
        command = parse_command(event.text)
        if command is None:
            return event
        if command.target is not None and command.target.lower() != self.bot.username.lower():
            return None
        mentioned = event.mentioned or command.target is not None
        return replace(
            event, kind="command", command=command.name, args=command.args, mentioned=mentioned
        )

    def _stop(self, update_id: int, data: object) -> InboundEvent:
        chat_data, draft_id, thread = _stop_fields(data)
        chat = Chat.de_json(chat_data, None)
        chat_type = chat_type_of(chat, None)
        ref = ChatRef(PLATFORM, str(chat.id), None if thread is None else str(thread))
        sender = Sender(str(chat.id), chat.full_name or chat.username or str(chat.id))
        return InboundEvent(
            kind="stop",
            platform=PLATFORM,
            update_id=str(update_id),
            chat=ref,
            chat_type=chat_type,
            sender=sender,
            session_key=self._key(chat_type, ref, sender),
            stream_id=str(draft_id),
        )

    def _button(self, update_id: int, query: CallbackQuery) -> InboundEvent | None:
        message = query.message
        if message is None or query.data is None:
            return None
        inner = message if isinstance(message, Message) else None
        chat_type = chat_type_of(message.chat, inner)
        chat = chat_ref_of(message.chat, inner, chat_type)
        sender = sender_of(query.from_user, None)
        return InboundEvent(
            kind="button",
            platform=PLATFORM,
            update_id=str(update_id),
            chat=chat,
            chat_type=chat_type,
            sender=sender,
            session_key=self._key(chat_type, chat, sender),
            button_data=query.data,
            message=SentMessage(chat, str(message.message_id)),
            press_id=query.id,
        )


def valid_update(update: Update, raw: str | None = None) -> Update:
    """``update`` itself, or parsed again from its JSON with lone surrogates replaced
    (U+FFFD is one UTF-16 unit, as a surrogate is, so entity offsets still fit): a text,
    name or string id holding one would fail where it is encoded (mentions, store, hash).

    ``raw``: the update's whole JSON as ``json.dumps`` writes it (ASCII: every surrogate
    escaped as ``\\udXXX``), when the caller has it — without such an escape no string
    can hold a lone surrogate, and the update is not serialised again to look."""
    if raw is not None and "\\ud" not in raw and "\\uD" not in raw:
        return update
    data = json.loads(raw) if raw is not None else update.to_dict()
    try:
        json.dumps(data, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return Update.de_json(valid_json(data), _bot_of(update))
    return update


def _bot_of(update: Update) -> Bot | None:
    try:
        return update.get_bot()
    except RuntimeError:  # built without a bot (tests, a replayed payload)
        return None


def _stop_fields(data: object) -> tuple[dict[str, object], int, int | None]:
    """``chat``, ``draft_id`` and ``message_thread_id`` of a ``stopped_message_generation``;
    :class:`MalformedUpdate` when they are not the Bot API's types."""
    fields = data if isinstance(data, dict) else {}
    chat, draft_id, thread = (fields.get(k) for k in ("chat", "draft_id", "message_thread_id"))
    if (
        isinstance(chat, dict)
        and _is_int(chat.get("id"))
        and _is_int(draft_id)
        and (thread is None or _is_int(thread))
    ):
        return chat, draft_id, thread
    raise MalformedUpdate(f"{STOP_UPDATE} {data!r}: chat.id and draft_id must be integers")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
