"""The Discord adapter's outbound calls: sends, uploads, edits, deletes, reactions, press
answers and typing, each one REST call through discord.py (:class:`DiscordOutbound`).

``allowed_mentions`` is *none* on every message and edit, so model text with
``@everyone``, ``@here`` or ``<@id>`` pings nobody. Buttons are
:class:`~adapters.discord.interactions.ButtonPress` items (state in the custom_id). A reply
to a slash command replaces its deferred response while the interaction token works, else
it is an ordinary message. A ``Send``'s or ``SendFile``'s nonce is derived from its outbox
key (:func:`nonce_of`). Sends and edits into one channel are paced by the gateway inside
Discord's channel budget (``adapters.discord.adapter.CHANNEL_LIMIT``); beyond that rate
limits are discord.py's: it waits out each 429 by its ``retry_after`` and retries (its
per-route buckets); what it gives up on is translated (:mod:`.errors`).

Streaming: Discord has no native stream, so ``capabilities.streaming`` is ``edit`` (for
``native`` and ``edit``) or ``off``: the gateway sends the first words as one message and
edits it in place every ``stream_interval`` (the channel budget spread evenly: 1 s), and
the final reply's first chunk replaces it (docs/architecture.md, "Streaming"). No
``LiveText`` reaches this adapter.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Callable

import discord

from adapters.base import AdapterError, ButtonRows, ChatRef, InboundEvent, SentMessage
from adapters.calls import (
    AnswerPress,
    Call,
    Delete,
    Edit,
    LiveText,
    React,
    Send,
    SendFile,
    Typing,
)
from adapters.discord.errors import TOKEN_GONE, translate
from adapters.discord.files import send_file
from adapters.discord.interactions import DeferredResponses, Responder, view_of
from adapters.discord.render import MAX_CONTENT, escape
from core.attachments import OutgoingFile

_log = logging.getLogger(__name__)

NO_PINGS = discord.AllowedMentions.none()
NONCE_LENGTH = 25


class DiscordOutbound:
    """:meth:`perform` for :class:`~adapters.discord.adapter.DiscordAdapter`: its client
    (None before ``start``), the slash commands deferred and being handled, and the
    presses deferred on arrival, by interaction id (both filled by the inbound side)."""

    def __init__(
        self,
        client: Callable[[], discord.Client | None],
        deferred: DeferredResponses,
        presses: dict[str, discord.Interaction],
    ) -> None:
        self._client = client
        self._deferred = deferred
        self._presses = presses

    def _channel(self, chat: ChatRef) -> discord.PartialMessageable:
        client = self._client()
        if client is None:
            raise AdapterError("discord: not started")
        return client.get_partial_messageable(int(chat.chat_id))

    async def perform(self, call: Call) -> SentMessage | None:
        """One outbound call (:mod:`adapters.calls`); a discord.py error is translated here,
        once (:func:`adapters.discord.errors.translate`)."""
        try:
            match call:
                case Send(chat, text, buttons, markup, key):
                    return await self.send(chat, text, buttons, markup, key)
                case SendFile(chat, file, caption, key):
                    return await self._send_file(chat, file, caption, key)
                case Edit(message, text, buttons, markup):
                    await self._edit(message, text, buttons, markup)
                case Delete(message):
                    await self._delete(message)
                case AnswerPress(event, text):
                    await self._answer(event, text)
                case Typing(chat):
                    await self._typing(chat)
                case LiveText():
                    pass  # capabilities.live_text is False: the gateway sends none
                case React(message, emoji):
                    await self._react(message, emoji)
        except discord.DiscordException as exc:
            raise translate(exc) from exc
        return None

    async def send(
        self, chat: ChatRef, text: str, buttons: ButtonRows, markup: bool, key: str | None
    ) -> SentMessage:
        content = text if markup else plain_content(text)
        view = view_of(buttons) if any(buttons) else None
        responder = self._deferred.claim(chat.chat_id) if self._deferred.open else None
        if responder is not None:
            replaced = await _replace_deferred(responder, content, view)
            if replaced is not None:
                return SentMessage(chat, replaced)
        nonce = nonce_of(key) if key is not None else secrets.randbits(64)  # as discord.py
        channel = self._channel(chat)
        if view is None:
            message = await channel.send(content, allowed_mentions=NO_PINGS, nonce=nonce)
        else:
            message = await channel.send(content, view=view, allowed_mentions=NO_PINGS, nonce=nonce)
        return SentMessage(chat, str(message.id))

    async def _send_file(
        self, chat: ChatRef, file: OutgoingFile, caption: str, key: str | None
    ) -> SentMessage:
        """Upload ``file`` into the chat (its thread or channel), caption shown as typed."""
        nonce = nonce_of(key) if key is not None else secrets.token_hex(12)
        message = await send_file(
            self._channel(chat), file, plain_content(caption), nonce, NO_PINGS
        )
        return SentMessage(chat, str(message.id))

    async def _edit(
        self, message: SentMessage, text: str, buttons: ButtonRows, markup: bool
    ) -> None:
        content = text if markup else plain_content(text)
        partial = self._channel(message.chat).get_partial_message(int(message.message_id))
        await partial.edit(content=content, view=view_of(buttons), allowed_mentions=NO_PINGS)

    async def _delete(self, message: SentMessage) -> None:
        partial = self._channel(message.chat).get_partial_message(int(message.message_id))
        await partial.delete()

    async def _react(self, message: SentMessage, emoji: str) -> None:
        """Add the bot's reaction (``PUT .../reactions/{emoji}/@me``; it keeps the others)."""
        partial = self._channel(message.chat).get_partial_message(int(message.message_id))
        await partial.add_reaction(emoji)

    async def _answer(self, event: InboundEvent, text: str | None) -> None:
        """The press was deferred on arrival; a notice goes to the presser only."""
        interaction = self._presses.pop(event.press_id or "", None)
        if interaction is None or not text:
            return
        await interaction.followup.send(text, ephemeral=True, allowed_mentions=NO_PINGS)

    async def _typing(self, chat: ChatRef) -> None:
        await self._channel(chat).typing()


def plain_content(text: str) -> str:
    """Plain text shown as typed: markdown escaped (unless that would not fit)."""
    escaped = escape(text)
    return escaped if len(escaped) <= MAX_CONTENT else text


def nonce_of(key: str) -> str:
    """The Discord nonce of an outbox chunk: derived from its key, so a resend after a
    crash carries the same one, and with ``enforce_nonce`` (discord.py sets it with every
    nonce) Discord returns the message the first send made instead of a second one
    (docs/architecture.md, "Exactly once"). Discord takes at most 25 characters."""
    return hashlib.sha256(key.encode()).hexdigest()[:NONCE_LENGTH]


async def _replace_deferred(
    responder: Responder, content: str, view: discord.ui.View | None
) -> str | None:
    """The deferred response edited into ``content`` (its message id); None when the
    interaction token no longer works (expired, or the response is gone): the caller then
    sends an ordinary message instead."""
    try:
        original = await responder.interaction.edit_original_response(
            content=content, view=view, allowed_mentions=NO_PINGS
        )
    except discord.HTTPException as exc:
        if exc.code not in TOKEN_GONE:
            raise translate(exc) from exc
        responder.expire()
        _log.info("discord: interaction %s token no longer works (%s); sending a message",
                  responder.interaction.id, exc.code)  # fmt: skip
        return None
    return str(original.id)
