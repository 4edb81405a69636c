"""Slack payloads (events, block actions, slash commands) → :class:`InboundEvent`.

Where a message belongs (the shared key rule, :mod:`adapters.session_keys`):

* a DM (``channel_type`` ``im``) is one session per user: ``slack:dm:<channel>``; the
  agent answers in the DM itself, or in the DM thread the message was written in;
* in a channel every conversation is a thread: a top-level message starts one at its own
  ``ts``, a reply belongs to its ``thread_ts`` — ``slack:thread:<channel>:<thread_ts>``,
  and the agent answers in that thread.

A channel message is for the agent when it mentions it (``<@bot>``, stripped from the
text) or when it is in a thread the agent has joined (``joined``: the adapter knows,
:class:`adapters.slack.adapter.SlackAdapter`); it is then marked ``reply_to_bot`` so the
gateway's mention rule lets it through. Any other thread needs a mention: no storms.

Commands in text: ``!stop``, ``!steer more tests`` (``text_prefix`` + a known name), and a
message that is exactly ``stop`` — Slack refuses slash commands inside threads, so text is
the way there. Slash commands are ``<slash_prefix><name>`` (``/stop``; another prefix such
as ``/agent-`` lets several bots share a workspace).

Nothing for us (``None``): the bot's own messages, edits, deletions, joins and other
subtypes, and empty text.

Text is made valid here, once: each payload is read through :func:`core.text.valid_json`,
so a lone UTF-16 surrogate in a text, a name or a file name becomes U+FFFD.

What a session key is made of is checked before anything is built from it
(:func:`unusable`): ``channel`` and ``user`` (or ``bot_id``) must be Slack ids, ``ts`` and
any ``thread_ts`` Slack timestamps (``1700000000.000100``), ``text``, ``subtype`` and
``channel_type`` strings. A message event that fails is a dead letter
(:meth:`adapters.slack.inbox.SlackInbox.reject`) and changes nothing; a press or a slash
command that fails is ignored with one WARNING (they were acknowledged on arrival).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

from adapters.base import ChatRef, ChatType, InboundEvent, Sender, SentMessage, SessionKey
from adapters.session_keys import KeyStrategy, SessionKeyRule, key_rule
from adapters.slack.files import attachments_of, message_files
from core.text import valid_json

_log = logging.getLogger(__name__)

PLATFORM = "slack"
SLACK_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A channel, user or bot id (``C0123``, ``U0123``): never a ``:`` a session key splits on."""
SLACK_TS = re.compile(r"[0-9]{1,12}\.[0-9]{1,9}")
"""A message timestamp, which is also its id in the channel (``1700000000.000100``)."""
WORD = re.compile(r"[a-z_]{1,32}")
HANDLED_SUBTYPES = frozenset(
    {None, "", "thread_broadcast", "file_share", "me_message", "bot_message"}
)
"""``bot_message`` is read so ``allow_bots`` can let a bot in; access ignores it by default."""
BARE_COMMANDS = frozenset({"stop"})
"""Words that are a command when they are the whole message."""

Json = dict[str, Any]
default_session_key: SessionKeyRule = key_rule(KeyStrategy())


@dataclass(frozen=True, slots=True)
class SlackIdentity:
    """Who the bot is in this workspace (``auth.test``)."""

    user_id: str
    bot_id: str | None = None

    @property
    def mention(self) -> str:
        return f"<@{self.user_id}>"


@dataclass(frozen=True, slots=True)
class MessagePlace:
    """Where a message event lives: the chat to answer in and its session key."""

    chat: ChatRef
    chat_type: ChatType
    key: SessionKey


class Normalizer:
    def __init__(
        self,
        identity: SlackIdentity,
        key_rule: SessionKeyRule = default_session_key,
        *,
        text_prefix: str = "!",
        slash_prefix: str = "/",
        commands: Collection[str] = (),
    ) -> None:
        self.identity, self.key_rule = identity, key_rule
        self.text_prefix, self.slash_prefix = text_prefix, slash_prefix
        self.commands = frozenset(commands)
        """Known command names (empty: any ``!word`` is a command)."""

    # messages -----------------------------------------------------------------------------
    def is_ours(self, event: Json) -> bool:
        """A message the bot itself wrote (its posts and their edits echo back)."""
        user, bot = event.get("user"), event.get("bot_id")
        return user == self.identity.user_id or (bot is not None and bot == self.identity.bot_id)

    def wanted(self, event: Json) -> bool:
        """A new user message with text or files (not ours, not an edit, join or deletion);
        whether its fields can be used is :func:`unusable`'s question (a malformed subtype
        is)."""
        if event.get("type") not in ("message", "app_mention") or self.is_ours(event):
            return False
        subtype = event.get("subtype")
        if isinstance(subtype, str) and subtype not in HANDLED_SUBTYPES:
            return False
        return bool(event.get("text")) or bool(message_files(event))

    def place(self, event: Json) -> MessagePlace:
        """The chat and session key of a message event."""
        channel, user = str(event.get("channel", "")), str(event.get("user", ""))
        thread = event.get("thread_ts")
        if event.get("channel_type") == "im":
            chat = ChatRef(PLATFORM, channel, str(thread) if thread else None)
            return MessagePlace(chat, "dm", self.key_rule(PLATFORM, "dm", channel, user_id=user))
        root = str(thread or event.get("ts", ""))
        key = self.key_rule(PLATFORM, "thread", channel, user_id=user, thread_id=root)
        return MessagePlace(ChatRef(PLATFORM, channel, root), "thread", key)

    def message(self, event: Json, *, joined: bool = False) -> InboundEvent | None:
        """The event of a user message; ``joined``: it is in a thread the agent is in.
        None for one not wanted or :func:`unusable` (the caller dead-letters those). Its
        files are offered attachments (:mod:`adapters.slack.files`); a message with files
        is never a command (its text is a caption), and one with no text has text ""."""
        event = valid_json(event)
        if not self.wanted(event) or unusable(event) is not None:
            return None
        place = self.place(event)
        raw_text = str(event.get("text") or "")
        mentioned = self.identity.mention in raw_text
        text = (
            " ".join(raw_text.replace(self.identity.mention, " ").split())
            if mentioned
            else raw_text
        )
        sender_id = str(event.get("user") or event.get("bot_id") or "unknown")
        base = InboundEvent(
            kind="text",
            platform=PLATFORM,
            update_id=message_id(event),
            chat=place.chat,
            chat_type=place.chat_type,
            sender=Sender(sender_id, sender_id, is_bot=is_bot_message(event)),
            session_key=place.key,
            text=text.strip(),
            mentioned=mentioned,
            reply_to_bot=joined,
            attachments=attachments_of(event),
            source=_source(place.chat, event),
        )
        return base if base.attachments else self._as_command(base)

    def _as_command(self, event: InboundEvent) -> InboundEvent:
        text = event.text.strip()
        if text.lower() in BARE_COMMANDS:
            return replace(event, kind="command", command=text.lower(), args="")
        if not text.startswith(self.text_prefix):
            return event
        name, _, args = text[len(self.text_prefix) :].partition(" ")
        name = name.lower()
        if not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", name) or not self._known(name):
            return event
        return replace(event, kind="command", command=name, args=args.strip())

    def _known(self, name: str) -> bool:
        return not self.commands or name in self.commands

    # slash commands -----------------------------------------------------------------------
    def command_name(self, command: str) -> str | None:
        """``/stop`` → ``stop`` (with the configured prefix); None when not ours."""
        if not command.startswith(self.slash_prefix):
            return None
        name = command[len(self.slash_prefix) :].lower()
        return name if name and self._known(name) else None

    def slash(self, body: Json, thread: str | None) -> InboundEvent | None:
        """A slash command; ``thread``: the thread it acts on (Slack sends none: the
        adapter names the caller's latest conversation in that channel)."""
        body = valid_json(body)
        name = self.command_name(str(body.get("command", "")))
        if name is None:
            return None
        channel, user = body.get("channel_id"), body.get("user_id")
        if not (_matches(SLACK_ID, channel) and _matches(SLACK_ID, user)):
            _log.warning("slack: slash command %s ignored: no usable channel_id/user_id", name)
            return None
        assert isinstance(channel, str) and isinstance(user, str)
        if thread is not None and not _matches(SLACK_TS, thread):
            thread = None
        dm = channel.startswith("D") or body.get("channel_name") == "directmessage"
        chat_type: ChatType = "dm" if dm else "thread" if thread else "channel"
        chat = ChatRef(PLATFORM, channel, None if dm else thread)
        key = self.key_rule(PLATFORM, chat_type, channel, user_id=user, thread_id=chat.thread_id)
        return InboundEvent(
            kind="command",
            platform=PLATFORM,
            update_id=f"cmd:{body.get('trigger_id', '')}",
            chat=chat,
            chat_type=chat_type,
            sender=Sender(user, str(body.get("user_name") or user)),
            session_key=key,
            command=name,
            args=str(body.get("text", "")).strip(),
            mentioned=True,
        )

    # buttons ------------------------------------------------------------------------------
    def press(self, body: Json) -> InboundEvent | None:
        """A ``block_actions`` click: a button event whose payload is the button's ``value``;
        None when the body has no button or its place cannot be read (logged)."""
        body = valid_json(body)
        actions = body.get("actions")
        action = _object(actions[0]) if isinstance(actions, list) and actions else {}
        channel, user = _object(body.get("channel")), _object(body.get("user"))
        container, message = _object(body.get("container")), _object(body.get("message"))
        ts = container.get("message_ts") or message.get("ts")
        thread = message.get("thread_ts")
        channel_id = channel.get("id")
        where = {"channel": channel_id, "user": user.get("id"), "ts": ts, "thread_ts": thread}
        if not action or channel_id is None:
            return None
        problem = _problem(where, PRESS_FIELDS)
        if problem is not None:
            _log.warning("slack: button press ignored: its %s", problem)
            return None
        channel_id, ts = str(channel_id), str(ts)
        im = "im" if channel_id.startswith("D") else "channel"
        place = self.place({**where, "channel_type": im})
        user_id = str(user["id"])
        sender = Sender(user_id, _text_or(user.get("name"), user_id))
        data = _text_or(action.get("value"), _text_or(action.get("action_id"), ""))
        return InboundEvent(
            kind="button",
            platform=PLATFORM,
            update_id=f"press:{_text_or(action.get('action_ts'), '')}",
            chat=place.chat,
            chat_type=place.chat_type,
            sender=sender,
            session_key=place.key,
            button_data=data,
            message=SentMessage(ChatRef(PLATFORM, channel_id, place.chat.thread_id), ts),
            press_id=_text_or(body.get("trigger_id"), ""),
        )

    # the agent session's Stop button -----------------------------------------------------
    def stopped(self, event: Json, stream_ts: str) -> InboundEvent | None:
        """An ``agent_session_stopped`` for the live stream ``stream_ts`` of its thread: a
        ``stop`` event from the user who pressed it; None when its place cannot be read."""
        event = valid_json(event)
        where = {k: event.get(k) for k in ("channel", "thread_ts", "user")}
        problem = _problem(where | {"ts": event.get("thread_ts")}, PRESS_FIELDS)
        if problem is not None or not isinstance(where["thread_ts"], str):
            _log.warning("slack: agent_session_stopped ignored: its %s", problem or "thread_ts")
            return None
        channel, user = str(where["channel"]), str(where["user"])
        im = "im" if channel.startswith("D") else "channel"
        place = self.place({**where, "channel_type": im})
        return InboundEvent(
            kind="stop",
            platform=PLATFORM,
            update_id=f"stopped:{channel}:{stream_ts}",
            chat=place.chat,
            chat_type=place.chat_type,
            sender=Sender(user, user),
            session_key=place.key,
            mentioned=True,  # addressed to the bot, as a slash command is
            stream_id=stream_ts,
        )


KEY_FIELDS: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    ("channel", SLACK_ID, True),
    ("ts", SLACK_TS, True),
    ("thread_ts", SLACK_TS, False),
    ("user", SLACK_ID, False),
)
"""``(field, pattern, required)``: what a message's session key and id are made of."""
PRESS_FIELDS = (("user", SLACK_ID, True), *KEY_FIELDS)
"""A press's place (read from its body) and who pressed."""
MESSAGE_FIELDS: tuple[tuple[str, re.Pattern[str] | None, bool], ...] = (
    ("bot_id", SLACK_ID, False),
    ("channel_type", WORD, False),
    ("subtype", None, False),
    ("text", None, False),
)
"""The other fields a user message is read from (``None``: any string)."""


def key_problem(event: Json) -> str | None:
    """Why a session key cannot be made of ``event``'s fields (None: it can). The reason
    names fields and types only, never a value (it is logged)."""
    return _problem(event, KEY_FIELDS)


def is_bot_message(event: Json) -> bool:
    """Sent by a bot: it names a ``bot_id`` or is a ``bot_message`` (a legacy integration)."""
    return "bot_id" in event or event.get("subtype") == "bot_message"


def unusable(event: Json) -> str | None:
    """Why a wanted message event cannot be taken in (None: it can): :func:`key_problem`,
    a sender neither ``user`` nor ``bot_id``, or a non-string text, subtype, channel type."""
    problem = key_problem(event) or _problem(event, MESSAGE_FIELDS)
    if problem is None and event.get("user") is None and event.get("bot_id") is None:
        problem = "user and bot_id are missing"
    return None if problem is None else f"message event: {problem}"


def _problem(
    event: Json, fields: tuple[tuple[str, re.Pattern[str] | None, bool], ...]
) -> str | None:
    for name, pattern, required in fields:
        value = event.get(name)
        if value is None and not required:
            continue
        if not isinstance(value, str) or (pattern is not None and not pattern.fullmatch(value)):
            return f"{name} is {_shape(value)}"
    return None


def _shape(value: object) -> str:
    """What ``value`` is, without saying what it says: ``missing``, ``a list``…"""
    if value is None:
        return "missing"
    if isinstance(value, str):
        return "malformed"
    return f"of type {type(value).__name__}"


def _matches(pattern: re.Pattern[str], value: object) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def _object(value: object) -> Json:
    return value if isinstance(value, dict) else {}


def _text_or(value: object, default: str) -> str:
    return value if isinstance(value, str) and value else default


def message_id(event: Json) -> str:
    """One user message's id whichever event carries it (``message`` or ``app_mention``,
    first delivery or retry): ``<channel>:<ts>``."""
    return f"{event.get('channel', '')}:{event.get('ts', '')}"


def _source(chat: ChatRef, event: Json) -> SentMessage | None:
    """The user's message (its channel and ``ts``), what a status reaction marks."""
    ts = event.get("ts")
    return SentMessage(ChatRef(PLATFORM, chat.chat_id), str(ts)) if ts else None
