"""The durable inbox: persist an update first, then deliver it, once per ``update_id``.

States of one update in the store's inbound queue::

    (fetched) --enqueue_inbound--> pending --> processing --sink returned--> done
                                                         \\--sink raised---> failed

Only after ``accept`` returns may the caller let Telegram consider the update confirmed
(advance the getUpdates offset, or answer the webhook 200). A duplicate ``update_id``
(Telegram redelivering after a restart) is refused by the store and never delivered twice.
On start, :meth:`Inbox.replay` delivers what a previous run left pending or processing.

Delivery: each update is handed to the sink in its own tracked task, started in arrival
order, so a long-running sink call never blocks a later ``/stop``. An update is marked done
once the sink has returned *and*, when a :data:`SettleWait` was given, the work it started
in its session has finished (the composition root waits for ``Dispatcher.wait_idle`` and
answers False when that was a shutdown cutting the turn short) — so an update whose turn
never answered stays unfinished and replays next run. Button presses are done as soon as
the sink returns (they start no turn). Cancelling a delivery (``close``) leaves the update
unfinished too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from telegram import Bot, Update
from telegram.error import TelegramError

from adapters.base import EventSink, InboundEvent
from adapters.telegram.normalize import PLATFORM, Normalizer
from core.store.base import InboundRecord, InboundState, Store

_log = logging.getLogger(__name__)

SettleWait = Callable[[str], Awaitable[bool]]
"""Wait until the work an event started in a session (canonical key) is over; True when it
ran to its end, False when it was cut short (the update then stays unfinished)."""


class Inbox:
    """Persist-then-deliver of updates for one adapter run."""

    def __init__(
        self,
        store: Store,
        bot: Bot,
        normalizer: Normalizer,
        sink: EventSink,
        settled: SettleWait | None = None,
    ) -> None:
        self.store = store
        self.bot = bot
        self.normalizer = normalizer
        self.sink = sink
        self.settled = settled
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

    async def accept_raw(self, data: dict[str, Any]) -> int:
        """An update PTB could not parse as part of its batch: parse it alone, or store it
        as ``failed`` (payload kept) so it never blocks the queue. Returns its update id."""
        update_id = int(data["update_id"])
        try:
            update = Update.de_json(data, self.bot)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            await self._reject(update_id, data, exc)
            return update_id
        await self.accept(update)
        return update_id

    async def _reject(self, update_id: int, data: dict[str, Any], exc: Exception) -> None:
        _log.error("telegram update %s is unreadable (%s); stored as failed", update_id, exc)
        record = InboundRecord(
            PLATFORM, str(update_id), "", json.dumps(data), time.time(), state="failed"
        )
        if await self.store.enqueue_inbound(record):
            await self.store.set_inbound_state(PLATFORM, record.update_id, "failed")

    async def replay(self) -> int:
        """Deliver the updates a previous run left unfinished; returns how many."""
        records = await self.store.unfinished_inbound(PLATFORM)
        for record in records:
            update = self._revive(record)
            if update is None:
                await self.store.set_inbound_state(PLATFORM, record.update_id, "failed")
            else:
                await self._deliver(record.update_id, update)
        if records:
            _log.info("telegram: replaying %d unfinished update(s)", len(records))
        return len(records)

    async def close(self) -> None:
        """Cancel deliveries in flight; their updates stay unfinished for the next run."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def drain(self) -> None:
        """Wait until every delivery started so far (and any started meanwhile) has ended."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _revive(self, record: InboundRecord) -> Update | None:
        try:
            data: dict[str, Any] = json.loads(record.payload)
            return Update.de_json(data, self.bot)
        except (ValueError, TypeError, KeyError) as exc:
            _log.error(
                "telegram update %s in the store is unreadable (%s); marked failed, kept",
                record.update_id,
                exc,
            )
            return None

    async def _deliver(self, update_id: str, update: Update) -> None:
        await self.store.set_inbound_state(PLATFORM, update_id, "processing")
        task = asyncio.get_running_loop().create_task(
            self._hand_over(update_id, update), name=f"telegram-update-{update_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    async def _hand_over(self, update_id: str, update: Update) -> None:
        state: InboundState = "done"
        try:
            event = self.normalizer.event(update)
            if event is None:
                await _answer_unhandled_press(update)
            else:
                await self.sink(event)
                if not await self._settle(event):
                    _log.info("telegram update %s: work cut short; replays next run", update_id)
                    return
        except Exception:
            _log.exception("telegram update %s: event handling failed", update_id)
            state = "failed"
        await self.store.set_inbound_state(PLATFORM, update_id, state)

    async def _settle(self, event: InboundEvent) -> bool:
        if self.settled is None or event.kind == "button":
            return True
        return await self.settled(str(event.session_key))

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.error("%s failed", task.get_name(), exc_info=task.exception())


async def _answer_unhandled_press(update: Update) -> None:
    """A press we make no event of (no payload) is still answered, or the client spins."""
    if update.callback_query is None:
        return
    try:
        await update.callback_query.answer()
    except TelegramError as exc:
        _log.warning("telegram: could not answer press %s: %s", update.callback_query.id, exc)
