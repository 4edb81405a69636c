"""The durable inbox: persist an update first, then deliver it, once per ``update_id``.

States of one update in the store's inbound queue::

    (fetched) --enqueue_inbound--> pending --> processing --sink returned--> done
                                                         \\--sink raised---> failed

Only after ``accept`` returns may the caller let Telegram consider the update confirmed
(advance the getUpdates offset, or answer the webhook 200). A duplicate ``update_id``
(Telegram redelivering after a restart) is refused by the store and never delivered twice.
On start, :meth:`Inbox.replay` delivers what a previous run left pending or processing.

Delivery: each update is handed to the sink in its own tracked task, started in arrival
order, so a long-running sink call (a turn) never blocks a later ``/stop``. The sink is
awaited until it has acted on the event; then the update is marked done. Cancelling a
delivery (``close``) leaves the update unfinished, so the next run replays it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from telegram import Bot, Update

from adapters.base import EventSink, InboundEvent
from adapters.telegram.normalize import PLATFORM, Normalizer
from core.store.base import InboundRecord, InboundState, Store

_log = logging.getLogger(__name__)


class Inbox:
    """Persist-then-deliver of updates for one adapter run."""

    def __init__(self, store: Store, bot: Bot, normalizer: Normalizer, sink: EventSink) -> None:
        self.store = store
        self.bot = bot
        self.normalizer = normalizer
        self.sink = sink
        self._tasks: set[asyncio.Task[None]] = set()

    async def accept(self, update: Update) -> bool:
        """Persist ``update`` and start its delivery; False for an already known update."""
        record = InboundRecord(
            platform=PLATFORM,
            update_id=str(update.update_id),
            session_key=self.normalizer.session_key(update),
            payload=json.dumps(update.to_dict()),
            received_at=time.time(),
        )
        if not await self.store.enqueue_inbound(record):
            _log.info("telegram update %s already received; not delivered again", update.update_id)
            return False
        await self._deliver(record.update_id, update)
        return True

    async def replay(self) -> int:
        """Deliver the updates a previous run left unfinished; returns how many."""
        records = await self.store.unfinished_inbound(PLATFORM)
        for record in records:
            update = self._revive(record)
            if update is not None:
                await self._deliver(record.update_id, update)
        if records:
            _log.info("telegram: replaying %d unfinished update(s)", len(records))
        return len(records)

    async def close(self) -> None:
        """Cancel deliveries in flight; their updates stay unfinished for the next run."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def _revive(self, record: InboundRecord) -> Update | None:
        try:
            data: dict[str, Any] = json.loads(record.payload)
            return Update.de_json(data, self.bot)
        except (ValueError, TypeError, KeyError) as exc:
            _log.error("telegram update %s unreadable in store: %s", record.update_id, exc)
            return None

    async def _deliver(self, update_id: str, update: Update) -> None:
        await self.store.set_inbound_state(PLATFORM, update_id, "processing")
        event = self.normalizer.event(update)
        task = asyncio.get_running_loop().create_task(
            self._hand_over(update_id, event), name=f"telegram-update-{update_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    async def _hand_over(self, update_id: str, event: InboundEvent | None) -> None:
        state: InboundState = "done"
        try:
            if event is not None:
                await self.sink(event)
        except Exception:
            _log.exception("telegram update %s: event handling failed", update_id)
            state = "failed"
        await self.store.set_inbound_state(PLATFORM, update_id, state)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.error("%s failed", task.get_name(), exc_info=task.exception())
