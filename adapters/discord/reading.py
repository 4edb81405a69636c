"""Reading discord.py's objects: a message or an interaction as the :class:`Envelope` the
inbox stores (:mod:`.normalize`), and what is known of one that cannot be read (its dead
letter). Attachments are read by :mod:`.files`."""

from __future__ import annotations

from typing import Any

import discord

from adapters.base import ChatType
from adapters.discord.files import attachments_of
from adapters.discord.normalize import Envelope, EnvelopeKind, parse_command, strip_mentions

THREAD_TYPES = frozenset(
    {discord.ChannelType.public_thread, discord.ChannelType.private_thread,
     discord.ChannelType.news_thread}
)  # fmt: skip
USER_MESSAGES = frozenset({discord.MessageType.default, discord.MessageType.reply})


def chat_type_of(channel: Any) -> ChatType:
    kind = getattr(channel, "type", None)
    if kind in (discord.ChannelType.private, discord.ChannelType.group):
        return "dm"
    if kind in THREAD_TYPES:
        return "thread"
    return "channel"


def message_envelope(message: discord.Message, bot: str, known: frozenset[str]) -> Envelope:
    """The envelope of a user's message (``bot``: the bot's user id; ``known``: our
    command names, for ``!name``)."""
    text = strip_mentions(message.content, bot)
    command = parse_command(text, known)
    resolved = message.reference.resolved if message.reference else None
    channel = message.channel
    kind: EnvelopeKind = "command" if command else "message"
    return Envelope(
        kind=kind,
        id=str(message.id),
        channel_id=str(message.channel.id),
        chat_type=chat_type_of(channel),
        author_id=str(message.author.id),
        author_name=message.author.display_name,
        author_bot=message.author.bot or message.webhook_id is not None,
        text=text,
        mentioned=any(str(user.id) == bot for user in message.mentions),
        reply_to_bot=isinstance(resolved, discord.Message) and str(resolved.author.id) == bot,
        bot_thread=isinstance(channel, discord.Thread) and str(channel.owner_id) == bot,
        command=command[0] if command else "",
        args=command[1] if command else "",
        attachments=attachments_of(message) if message.attachments else (),
    )


def interaction_envelope(
    interaction: discord.Interaction, kind: EnvelopeKind, **fields: Any
) -> Envelope:
    """The envelope of a press or slash command (``ValueError``: an unreadable one)."""
    user = interaction.user
    if not isinstance(user, (discord.User, discord.Member)):
        raise ValueError("the interaction names no user")
    if not isinstance(interaction.channel_id, int):
        raise ValueError("the interaction names no channel")
    if not isinstance(interaction.token, str):
        raise ValueError("the interaction's token is not a string")
    return Envelope(
        kind=kind,
        id=str(interaction.id),
        channel_id=str(interaction.channel_id),
        chat_type=chat_type_of(interaction.channel),
        author_id=str(user.id),
        author_name=user.display_name,
        author_bot=user.bot,
        mentioned=True,
        **fields,
    )


def known_fields(message: discord.Message) -> dict[str, Any]:
    """What can be read of a message discord.py built only in part (for its dead letter)."""
    channel = getattr(message, "channel", None)
    author = getattr(message, "author", None)
    return {"id": message.id, "channel_id": getattr(channel, "id", None),
            "author_id": getattr(author, "id", None),
            "content": getattr(message, "content", None)}  # fmt: skip


def unreadable(exc: Exception) -> str:
    return f"unreadable: {type(exc).__name__}: {exc}"
