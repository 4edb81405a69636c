"""The web chat's durable inbox: a sent message is stored first, then delivered, once.

A page names every message it sends with an id of its own choosing; the message is stored
in the store's inbound queue under ``(platform "web", "<conversation>/<id>")`` before it
is delivered. A retried POST with the same id (a flaky network, a double click, a reload
that resends) finds the id known and starts nothing: one message, one turn.

States (as for Telegram's inbox)::

    POST /api/send --enqueue_inbound--> pending --deliver--> processing
    processing --sink returned, turn's reply delivered (settled True)--> done
               --cut short by shutdown (settled False) or cancelled-----> processing
                                                                          (replays next run)
               --the sink or the settle wait raised----------------------> failed

On start, :meth:`WebInbox.replay` delivers what a previous run left unfinished.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

from adapters.base import EventSink, InboundEvent
from core.store.base import InboundRecord, InboundState, Store
from core.tasks import TaskSet

_log = logging.getLogger(__name__)

PLATFORM = "web"

SettleWait = Callable[[str, str], Awaitable[bool]]
"""``(session_key, update_id)`` → True once the work the message started is over (its
reply delivered); False when a shutdown cut it short. ``GatewayService.update_settled``."""


@dataclass(frozen=True, slots=True)
class WebMessage:
    """One message typed in the page, as stored in the inbound queue."""

    conversation: str
    client_id: str
    text: str

    @property
    def update_id(self) -> str:
        return f"{self.conversation}/{self.client_id}"


EventOf = Callable[[WebMessage], InboundEvent]
Started = Callable[[WebMessage, bool], None]
"""Told ``(message, True)`` when its delivery starts and ``(message, False)`` when over."""


class WebInbox:
    def __init__(
        self,
        store: Store,
        sink: EventSink,
        event_of: EventOf,
        *,
        settled: SettleWait | None = None,
        activity: Started | None = None,
    ) -> None:
        self.store, self.sink, self.event_of = store, sink, event_of
        self.settled, self.activity = settled, activity
        self._deliveries = TaskSet(_log)

    async def accept(self, message: WebMessage, session_key: str) -> bool:
        """Store and start delivering ``message``; False when its id is already known."""
        record = InboundRecord(
            platform=PLATFORM,
            update_id=message.update_id,
            session_key=session_key,
            payload=json.dumps(asdict(message)),
            received_at=time.time(),
        )
        if not await self.store.enqueue_inbound(record):
            _log.info("web message %s already received; not delivered again", record.update_id)
            return False
        await self._deliver(message)
        return True

    async def replay(self) -> int:
        """Deliver the messages a previous run left unfinished; returns how many."""
        records = await self.store.unfinished_inbound(PLATFORM)
        for record in records:
            message = _revive(record)
            if message is None:
                await self.store.set_inbound_state(PLATFORM, record.update_id, "failed")
            else:
                await self._deliver(message)
        if records:
            _log.info("web: replaying %d unfinished message(s)", len(records))
        return len(records)

    async def close(self) -> None:
        """Cancel deliveries in flight; their messages stay unfinished for the next run."""
        await self._deliveries.aclose()

    async def drain(self) -> None:
        await self._deliveries.drain()

    async def _deliver(self, message: WebMessage) -> None:
        try:
            await self.store.set_inbound_state(PLATFORM, message.update_id, "processing")
        except Exception:
            _log.exception("web message %s: could not mark it processing", message.update_id)
        name = f"web-message-{message.update_id}"
        self._deliveries.spawn(self._hand_over(message), name=name)

    async def _hand_over(self, message: WebMessage) -> None:
        state: InboundState = "done"
        if self.activity is not None:
            self.activity(message, True)
        try:
            event = self.event_of(message)
            await self.sink(event)
            if not await self._settle(event):
                _log.info("web message %s: cut short; replays next run", message.update_id)
                return
        except Exception:
            _log.exception("web message %s: handling failed", message.update_id)
            state = "failed"
        finally:
            if self.activity is not None:
                self.activity(message, False)
        await self.store.set_inbound_state(PLATFORM, message.update_id, state)

    async def _settle(self, event: InboundEvent) -> bool:
        if self.settled is None:
            return True
        return await self.settled(str(event.session_key), event.update_id)


def _revive(record: InboundRecord) -> WebMessage | None:
    try:
        data = json.loads(record.payload)
        return WebMessage(str(data["conversation"]), str(data["client_id"]), str(data["text"]))
    except (ValueError, TypeError, KeyError) as exc:
        _log.error("web message %s in the store is unreadable (%s)", record.update_id, exc)
        return None
