"""Slack's durable inbox: a user message is stored before Slack is told it arrived, and
starts one turn however often it is delivered.

One message can reach us several times: as ``message`` *and* ``app_mention`` when it names
the bot, and again when Slack retries an envelope it thinks was not acknowledged
(``retry_attempt`` / ``X-Slack-Retry-Num``). Each has its own ``event_id`` but the same
channel and ``ts``, so the inbound queue is keyed by ``<channel>:<ts>``
(:func:`adapters.slack.normalize.message_id`); the first delivery's ``event_id`` is kept in
the stored payload. States, as for the other inboxes (:mod:`adapters.inbox` does the
storing, quarantine and storage outages)::

    (event) --enqueue_inbound--> pending --_deliver--> processing
    processing --sink returned, turn answered (settled True)--> done
               --cut short by shutdown, or cancelled-----------> processing (replays next run)
               --the sink or the settle wait raised------------> failed (+ dead letter)

The listener acknowledges the envelope only after :meth:`SlackInbox.accept` returned; a
store outage raises instead, so Slack redelivers once storage is back.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from adapters.base import ChatRef, EventSink, InboundEvent
from adapters.inbox import Intake, Notify
from adapters.slack.normalize import PLATFORM
from core.store.base import InboundRecord, InboundState, Store, StoreUnavailable
from core.tasks import TaskSet

_log = logging.getLogger(__name__)

SettleWait = Callable[[str, str], Awaitable[bool]]
Revive = Callable[[dict[str, Any]], InboundEvent | None]
"""A stored payload → its event again (None: nothing for us any more)."""


class SlackInbox:
    def __init__(
        self,
        store: Store,
        sink: EventSink,
        *,
        settled: SettleWait | None = None,
        notify: Notify | None = None,
    ) -> None:
        self.store, self.sink, self.settled = store, sink, settled
        self.intake = Intake(store, PLATFORM, notify)
        self._deliveries = TaskSet(_log)

    async def accept(self, event: InboundEvent, payload: dict[str, Any]) -> bool:
        """Store ``event`` (``payload`` is what revives it) and start delivering it; False
        when it was already received (a duplicate) or quarantined."""
        raw = json.dumps(payload, default=str)
        record = InboundRecord(PLATFORM, event.update_id, str(event.session_key), raw, time.time())
        taken = await self.intake.take(
            event.update_id, raw, lambda: self.store.enqueue_inbound(record), _notice_chat(event)
        )
        if taken != "stored":
            _log.info("slack message %s %s; not delivered again", event.update_id, taken)
            return False
        await self._deliver(event)
        return True

    async def replay(self, revive: Revive) -> int:
        """Deliver what a previous run left unfinished; returns how many."""
        records = await self.store.unfinished_inbound(PLATFORM)
        for record in records:
            event = _revived(record, revive)
            if event is None:
                await self.store.set_inbound_state(PLATFORM, record.update_id, "done")
            else:
                await self._deliver(event)
        if records:
            _log.info("slack: replaying %d unfinished message(s)", len(records))
        return len(records)

    async def close(self) -> None:
        """Cancel deliveries in flight; they stay unfinished for the next run."""
        await self._deliveries.aclose()

    async def drain(self) -> None:
        await self._deliveries.drain()

    async def _deliver(self, event: InboundEvent) -> None:
        try:
            await self.store.set_inbound_state(PLATFORM, event.update_id, "processing")
        except Exception:
            _log.exception("slack message %s: could not mark it processing", event.update_id)
        self._deliveries.spawn(self._hand_over(event), name=f"slack-message-{event.update_id}")

    async def _hand_over(self, event: InboundEvent) -> None:
        state: InboundState = "done"
        try:
            await self.sink(event)
            if self.settled is not None and not await self.settled(
                str(event.session_key), event.update_id
            ):
                _log.info("slack message %s: cut short; replays next run", event.update_id)
                return
        except Exception as exc:
            _log.exception("slack message %s: handling failed", event.update_id)
            state = "failed"
            await self.intake.reject(event.update_id, "", exc)
        try:
            await self.store.set_inbound_state(PLATFORM, event.update_id, state)
        except StoreUnavailable as exc:
            _log.warning("slack message %s: not marked %s (%s)", event.update_id, state, exc)


def _revived(record: InboundRecord, revive: Revive) -> InboundEvent | None:
    try:
        return revive(json.loads(record.payload))
    except Exception as exc:
        _log.error("slack message %s in the store is unreadable (%s)", record.update_id, exc)
        return None


def _notice_chat(event: InboundEvent) -> ChatRef | None:
    """Where to tell that the store is out: only a conversation addressed to the bot."""
    addressed = event.chat_type == "dm" or event.mentioned or event.reply_to_bot
    return event.chat if addressed and not event.sender.is_bot else None
