"""The Slack adapter's outbound calls (:class:`SlackOutbound`).

``chat.postMessage`` into the conversation's thread, ``chat.update``, ``chat.delete``;
buttons as Block Kit (:mod:`adapters.slack.blocks`); a press's answer as an ephemeral
message to the presser (``chat.postEphemeral``: a refusal reveals nothing to the channel);
``Typing`` as the thread's status (:mod:`adapters.slack.status`); an answer streamed as it
is written as a chat stream in its thread, whose message the reply then takes over
(:mod:`adapters.slack.streams`; the agent session's Stop button arrives as a ``stop``
event while that stream is live); ``SendFile`` as slack_sdk's v2 external upload into the
thread (:mod:`adapters.slack.files`). A reply chunk carries its outbox key as message
metadata (:func:`chunk_metadata`), so one in flight at a crash is found and not posted
again (docs/architecture.md, "Exactly once"). Failures are raised as the adapter error
tree (:mod:`adapters.slack.errors`); ``ratelimited`` is :class:`~adapters.base.RateLimited`,
which the gateway waits out and retries — Slack refused the call, so nothing is duplicated.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import (
    AdapterError,
    ButtonRows,
    ChatRef,
    InboundEvent,
    MessageGone,
    RateLimited,
    SentMessage,
)
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
from adapters.session_keys import SessionKeyRule
from adapters.slack.blocks import message_blocks
from adapters.slack.errors import error_code, platform_errors, translate
from adapters.slack.files import shared_file, upload
from adapters.slack.normalize import PLATFORM, SlackIdentity
from adapters.slack.render import neutralise_plain
from adapters.slack.status import ThreadStatus
from adapters.slack.streams import SlackStreams, stop_cut
from core.attachments import OutgoingFile
from core.bounded import BoundedMap

_log = logging.getLogger(__name__)

CHUNK_EVENT = "commonos_chunk"
"""The metadata ``event_type`` of a reply chunk (its payload: ``{"chunk": <outbox key>}``)."""
LOOKUP_LIMIT = 100
"""Latest messages read when looking for a chunk that was in flight at a crash."""
LOOKUP_MARGIN = 60.0
"""Seconds before the send began that the lookup starts from (clocks differ)."""
CANT_UPDATE = "cant_update_message"
"""``chat.update`` of a message that is not the bot's, or of a stream still live."""
SLACK_REACTIONS = {"👀": "eyes", "✅": "white_check_mark", "❌": "x"}
"""Slack names its emoji: the status reactions' names."""


class SlackOutbound:
    """:meth:`perform` for :class:`~adapters.slack.adapter.SlackAdapter`, with the thread
    status and the chat streams it drives. ``joined`` (shared with the inbound side) is
    where a thread the bot answered in is marked; ``identity`` is None until ``start``;
    ``status_text`` and ``status_lease`` are the thread status's words and how long Slack
    keeps it unrefreshed (``SlackSettings``)."""

    def __init__(
        self,
        client: AsyncWebClient,
        key_rule: SessionKeyRule,
        joined: BoundedMap[str, bool],
        identity: Callable[[], SlackIdentity | None],
        *,
        status_text: str,
        status_lease: float,
    ) -> None:
        self.client, self.key_rule = client, key_rule
        self._joined = joined
        self._identity = identity
        self.status = ThreadStatus(self._set_status, text=status_text, lease=status_lease)
        self.streams = SlackStreams(client, self.clear_status)

    async def perform(self, call: Call) -> SentMessage | None:
        """One outbound call (:mod:`adapters.calls`)."""
        match call:
            case Send(chat, text, buttons, markup, key, in_flight_since):
                return await self.send(chat, text, buttons, markup, key, in_flight_since)
            case SendFile(chat, file, caption, _key, in_flight_since):
                return await self._send_file(chat, file, caption, in_flight_since)
            case Edit(message, text, buttons, markup):
                await self._edit(message, text, buttons, markup)
            case Delete(message):
                await self._delete(message)
            case AnswerPress(event, text):
                await self._answer(event, text)
            case Typing(chat):
                await self._typing(chat)
            case LiveText(chat, text, "seal"):
                await self.streams.seal(chat)
            case LiveText(chat, text, "append"):
                return await self.streams.show(chat, self.streams.shown(chat) + text)
            case LiveText(chat, text, _):
                return await self.streams.show(chat, text)
            case React(message, emoji):
                await self._react(message, emoji)
        return None

    async def send(
        self,
        chat: ChatRef,
        text: str,
        buttons: ButtonRows,
        markup: bool,
        key: str | None,
        in_flight_since: float | None = None,
    ) -> SentMessage:
        """Post a message; a reply chunk (``key``) carries its key as metadata, and one
        whose earlier send was in flight at a crash is looked for first: found, it is not
        posted again (docs/architecture.md, "Exactly once")."""
        if key is not None and in_flight_since is not None:
            found = await self._posted(chat, key, in_flight_since)
            if found is not None:
                return found
        body = text if markup else neutralise_plain(text)
        if key is not None and (taken := await self._take_over(chat, body, buttons, markup, key)):
            return taken
        await self.clear_status(chat)
        with platform_errors():
            response = await self.client.chat_postMessage(
                channel=chat.chat_id,
                thread_ts=chat.thread_id,
                text=body,
                blocks=message_blocks(body, buttons, markup=markup) or None,
                mrkdwn=markup,
                unfurl_links=False,
                metadata=chunk_metadata(key) if key is not None else None,
            )
        if chat.thread_id is not None:
            self._joined.put(str(self._thread_key(chat)), True)
        return SentMessage(chat, str(response["ts"]))

    async def _take_over(
        self, chat: ChatRef, body: str, buttons: ButtonRows, markup: bool, key: str
    ) -> SentMessage | None:
        """A reply chunk after a sealed stream: ``chat.update`` of the stream's message
        (:mod:`adapters.slack.streams`); None when there is none or it is gone."""
        ts = self.streams.sealed(chat)
        if ts is None:
            return None
        try:
            with platform_errors():
                await self.client.chat_update(
                    channel=chat.chat_id,
                    ts=ts,
                    text=body,
                    blocks=message_blocks(body, buttons, markup=markup),
                    metadata=chunk_metadata(key),
                )
        except MessageGone:
            self.streams.taken(chat)
            return None
        self.streams.taken(chat)
        self._joined.put(str(self._thread_key(chat)), True)
        return SentMessage(chat, ts)

    async def _send_file(
        self, chat: ChatRef, file: OutgoingFile, caption: str, in_flight_since: float | None
    ) -> SentMessage:
        """Share a file in the conversation; one whose earlier upload was in flight at a
        crash is looked for first (:mod:`adapters.slack.files`, "Exactly once")."""
        if in_flight_since is not None:
            found = await self._shared(chat, file, in_flight_since)
            if found is not None:
                return found
        await self.clear_status(chat)
        sent = await upload(self.client, chat, file, neutralise_plain(caption))
        if chat.thread_id is not None:
            self._joined.put(str(self._thread_key(chat)), True)
        return sent

    async def _shared(self, chat: ChatRef, file: OutgoingFile, since: float) -> SentMessage | None:
        """The bot's share of ``file`` since its upload began, or None (also when the
        lookup failed: the file is then uploaded, at least once)."""
        identity = self._identity()
        if identity is None:
            return None
        try:
            messages = await self._latest(chat, f"{since - LOOKUP_MARGIN:.6f}")
        except RateLimited:
            raise
        except AdapterError as exc:
            _log.warning("slack: file %s not looked up in %s (%s); uploading", file.key, chat, exc)
            return None
        bot = (identity.user_id, identity.bot_id)
        found = shared_file(messages, file, bot)
        return None if found is None else SentMessage(chat, found)

    async def _posted(self, chat: ChatRef, key: str, since: float) -> SentMessage | None:
        """The message carrying chunk ``key`` that an earlier run posted (its send was in
        flight at a crash), looked up in the conversation's latest messages since the send
        began; None when Slack has none, or the lookup failed (then the chunk is posted:
        at least once). ``RateLimited`` goes up, so the send waits and tries again."""
        try:
            messages = await self._latest(chat, f"{since - LOOKUP_MARGIN:.6f}")
        except RateLimited:
            raise
        except AdapterError as exc:
            _log.warning("slack: chunk %s not looked up in %s (%s); posting it", key, chat, exc)
            return None
        found = next((m for m in messages if _carries(m, key)), None)
        return None if found is None else SentMessage(chat, str(found["ts"]))

    async def _latest(self, chat: ChatRef, oldest: str) -> list[Any]:
        """The conversation's messages after ``oldest`` with their metadata: the channel's
        (a DM's top level) or the thread's."""
        with platform_errors():
            if chat.thread_id is None:
                response = await self.client.conversations_history(
                    channel=chat.chat_id, oldest=oldest, limit=LOOKUP_LIMIT,
                    include_all_metadata=True,
                )  # fmt: skip
            else:
                response = await self.client.conversations_replies(
                    channel=chat.chat_id, ts=chat.thread_id, oldest=oldest, limit=LOOKUP_LIMIT,
                    include_all_metadata=True,
                )  # fmt: skip
        messages = response.get("messages")
        return messages if isinstance(messages, list) else []

    def _thread_key(self, chat: ChatRef) -> object:
        return self.key_rule(
            PLATFORM, "thread", chat.chat_id, user_id=None, thread_id=chat.thread_id
        )

    async def _edit(
        self, message: SentMessage, text: str, buttons: ButtonRows, markup: bool
    ) -> None:
        body = text if markup else neutralise_plain(text)
        try:
            with platform_errors():
                await self._update(message, body, buttons, markup)
        except AdapterError as exc:
            if not self._cut_stream(exc, message):
                raise
            await stop_cut(self.client, message)  # a stream a killed process left live
            with platform_errors():
                await self._update(message, body, buttons, markup)

    def _cut_stream(self, exc: AdapterError, message: SentMessage) -> bool:
        """Was ``message`` not updated because it is a stream still live that this process
        does not write (one a killed process left)?"""
        cause = exc.__cause__
        refused = isinstance(cause, SlackApiError) and error_code(cause) == CANT_UPDATE
        return refused and not self.streams.writes(message)

    async def _update(
        self, message: SentMessage, body: str, buttons: ButtonRows, markup: bool
    ) -> None:
        await self.client.chat_update(
            channel=message.chat.chat_id,
            ts=message.message_id,
            text=body,
            blocks=message_blocks(body, buttons, markup=markup),
        )

    async def _delete(self, message: SentMessage) -> None:
        with platform_errors():
            await self.client.chat_delete(channel=message.chat.chat_id, ts=message.message_id)

    async def _react(self, message: SentMessage, emoji: str) -> None:
        """``reactions.add`` by name (👀 ``eyes``, ✅ ``white_check_mark``, ❌ ``x``); one the
        bot already put there (``already_reacted``, a replay) is no error."""
        try:
            await self.client.reactions_add(
                channel=message.chat.chat_id,
                timestamp=message.message_id,
                name=SLACK_REACTIONS.get(emoji, emoji),
            )
        except SlackApiError as exc:
            if error_code(exc) != "already_reacted":
                raise translate(exc) from exc

    async def _answer(self, event: InboundEvent, text: str | None) -> None:
        """The press was acknowledged on arrival; a notice goes to the presser alone."""
        if not text:
            return
        with platform_errors():
            await self.client.chat_postEphemeral(
                channel=event.chat.chat_id,
                user=event.sender.id,
                text=neutralise_plain(text),
                thread_ts=event.chat.thread_id,
            )

    async def _typing(self, chat: ChatRef) -> None:
        """The thread's "is thinking…" status (a DM's top level has none)."""
        if chat.thread_id is not None:
            await self.status.show((chat.chat_id, chat.thread_id))

    async def clear_status(self, chat: ChatRef) -> None:
        if chat.thread_id is not None:
            await self.status.clear((chat.chat_id, chat.thread_id))

    async def _set_status(self, channel: str, thread_ts: str, status: str) -> object:
        with platform_errors():
            return await self.client.assistant_threads_setStatus(
                channel_id=channel, thread_ts=thread_ts, status=status
            )


def chunk_metadata(key: str) -> dict[str, Any]:
    """The message metadata that names the outbox chunk a message carries."""
    return {"event_type": CHUNK_EVENT, "event_payload": {"chunk": key}}


def _carries(message: Any, key: str) -> bool:
    metadata = message.get("metadata") if isinstance(message, dict) else None
    if not isinstance(metadata, dict) or metadata.get("event_type") != CHUNK_EVENT:
        return False
    payload = metadata.get("event_payload")
    return isinstance(payload, dict) and payload.get("chunk") == key
