"""Slack's messages in the shared durable inbox (:class:`adapters.inbox.DurableInbox`, whose
docstring draws the states): a user message is stored before Slack is told it arrived, and
starts one turn however often it is delivered.

One message can reach us several times: as ``message`` *and* ``app_mention`` when it names
the bot, and again when Slack retries an envelope it thinks was not acknowledged
(``retry_attempt`` / ``X-Slack-Retry-Num``). Each has its own ``event_id`` but the same
channel and ``ts``, so the inbound queue is keyed by ``<channel>:<ts>``
(:func:`adapters.slack.normalize.message_id`); the first delivery's ``event_id`` is kept in
the stored payload, which is what revives the message on replay.

The listener acknowledges the envelope only after :meth:`SlackInbox.receive` returned; a
store outage raises instead, so Slack redelivers once storage is back.

A message event whose key fields cannot be read (:func:`adapters.slack.normalize.unusable`)
is never queued: :meth:`SlackInbox.reject` keeps it as a dead letter under a digest of the
event (``unreadable-<16 hex>``, so a redelivery is the same letter), with one WARNING
naming the field, and the envelope is acknowledged.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from adapters.base import ChatRef, EventSink, InboundEvent
from adapters.inbox import DurableInbox, ItemFormat, Notify
from adapters.slack.normalize import PLATFORM
from core.store.base import InboundRecord, Store

Revive = Callable[[dict[str, Any]], InboundEvent | None]
"""A stored payload → its event again (None: nothing for us any more)."""


@dataclass(frozen=True, slots=True)
class SlackMessage:
    """One user message: its event, and the payload (``event``, ``event_id``, ``joined``)
    stored to revive it."""

    event: InboundEvent
    payload: dict[str, Any]

    def to_json(self) -> str:
        return json.dumps(self.payload, default=str)


def messages(revive: Revive) -> ItemFormat[SlackMessage]:
    """How Slack messages are stored, keyed by channel and ``ts``."""

    def from_record(record: InboundRecord) -> SlackMessage | None:
        payload = json.loads(record.payload)
        event = revive(payload)
        return None if event is None else SlackMessage(event, payload)

    return ItemFormat(
        PLATFORM, "message", lambda m: m.event.update_id, SlackMessage.to_json, from_record
    )


class SlackInbox(DurableInbox[SlackMessage]):
    def __init__(
        self,
        store: Store,
        sink: EventSink,
        revive: Revive,
        *,
        notify: Notify | None = None,
    ) -> None:
        self.sink = sink
        form = messages(revive)
        super().__init__(store, form, self._handle, notify=notify)

    async def receive(self, event: InboundEvent, payload: dict[str, Any]) -> bool:
        """Store ``event`` (``payload`` is what revives it) and start delivering it; False
        when it was already received (a duplicate) or quarantined."""
        message = SlackMessage(event, payload)
        return await self.accept(message, str(event.session_key), _notice_chat(event))

    async def reject(self, event: object, event_id: object, problem: str) -> None:
        """Keep a message event that cannot be read as a dead letter (``problem`` says why,
        without its text); raises :class:`~core.store.base.StoreUnavailable` when even that
        cannot be written, so the envelope stays unacknowledged like any other."""
        raw = json.dumps({"event": event, "event_id": event_id}, default=str)
        await self.intake.reject(unreadable_id(event), raw, problem)

    async def _handle(self, message: SlackMessage) -> InboundEvent:
        await self.sink(message.event)
        return message.event


def _notice_chat(event: InboundEvent) -> ChatRef | None:
    """Where to tell that the store is out: only a conversation addressed to the bot (a
    channel's every message reaches us, so a bare command there does not count)."""
    addressed = event.chat_type == "dm" or event.mentioned or event.reply_to_bot
    return event.chat if addressed and not event.sender.is_bot else None


def unreadable_id(event: object) -> str:
    """The id an unreadable event is kept under: a digest of it without its ``type``, so a
    message delivered as ``message`` and ``app_mention`` (and any retry) is one letter."""
    if isinstance(event, dict):
        event = {key: value for key, value in event.items() if key != "type"}
    text = json.dumps(event, sort_keys=True, default=str)
    return f"unreadable-{hashlib.sha256(text.encode()).hexdigest()[:16]}"
