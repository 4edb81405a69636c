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
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

from adapters.base import ChatRef, ChatType, InboundEvent, Sender, SentMessage, SessionKey
from adapters.session_keys import KeyStrategy, SessionKeyRule, key_rule

PLATFORM = "slack"
HANDLED_SUBTYPES = frozenset({None, "", "thread_broadcast", "file_share", "me_message"})
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
        """A new user message with text (not ours, not an edit, join or deletion)."""
        if event.get("type") not in ("message", "app_mention") or self.is_ours(event):
            return False
        return event.get("subtype") in HANDLED_SUBTYPES and bool(event.get("text"))

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
        """The event of a user message; ``joined``: it is in a thread the agent is in."""
        if not self.wanted(event):
            return None
        place = self.place(event)
        raw_text = str(event.get("text", ""))
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
            sender=Sender(sender_id, sender_id, is_bot="bot_id" in event),
            session_key=place.key,
            text=text.strip(),
            mentioned=mentioned,
            reply_to_bot=joined,
        )
        return self._as_command(base)

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
        name = self.command_name(str(body.get("command", "")))
        if name is None:
            return None
        channel, user = str(body.get("channel_id", "")), str(body.get("user_id", ""))
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
        """A ``block_actions`` click: a button event whose payload is the button's ``value``."""
        actions = body.get("actions") or []
        container, channel = body.get("container") or {}, body.get("channel") or {}
        message = body.get("message") or {}
        if not actions or not channel.get("id"):
            return None
        action, user = actions[0], body.get("user") or {}
        channel_id, ts = str(channel["id"]), str(container.get("message_ts") or message.get("ts"))
        thread = message.get("thread_ts")
        place = self.place(
            {"channel": channel_id, "user": user.get("id"), "ts": ts, "thread_ts": thread,
             "channel_type": "im" if channel_id.startswith("D") else "channel"}
        )  # fmt: skip
        sender = Sender(str(user.get("id", "")), str(user.get("name") or user.get("id", "")))
        data = str(action.get("value") or action.get("action_id") or "")
        return InboundEvent(
            kind="button",
            platform=PLATFORM,
            update_id=f"press:{action.get('action_ts', '')}",
            chat=place.chat,
            chat_type=place.chat_type,
            sender=sender,
            session_key=place.key,
            button_data=data,
            message=SentMessage(ChatRef(PLATFORM, channel_id, place.chat.thread_id), ts),
            press_id=str(body.get("trigger_id", "")),
        )


def message_id(event: Json) -> str:
    """One user message's id whichever event carries it (``message`` or ``app_mention``,
    first delivery or retry): ``<channel>:<ts>``."""
    return f"{event.get('channel', '')}:{event.get('ts', '')}"
