"""The durable inbox: persist an update first, then deliver it, once per ``update_id``.

States of one update in the store's inbound queue (``_deliver``, ``_hand_over``,
``_settle``)::

    (fetched) --enqueue_inbound--> pending --_deliver--> processing
    (unparseable, accept_raw) --stored as--> failed

    processing --nothing for us (event None)-------------> done
               --sink returned, settled True-------------> done
               --sink returned, settled False------------> processing  (replays next run)
               --delivery cancelled (close)--------------> processing  (replays next run)
               --normalize, sink or settle wait raised---> failed

    pending | processing --replay on start--> processing again  (unreadable payload: failed)

The sink (the gateway's Router) answers its own failures in the chat and never raises, so
an update whose routing failed still ends ``done``; ``failed`` is for updates we could not
read or whose handling raised anyway.

Only after ``accept`` returns may the caller let Telegram consider the update confirmed
(advance the getUpdates offset, or answer the webhook 200). A duplicate ``update_id``
(Telegram redelivering after a restart) is refused by the store and never delivered twice.
On start, :meth:`Inbox.replay` delivers what a previous run left pending or processing.

Delivery: each update is handed to the sink in its own tracked task, started in arrival
order, so a long-running sink call never blocks a later ``/stop``. An update is marked done
once the sink has returned *and*, when an :data:`UpdateSettleWait` was given, the turn it
started has delivered its reply (``GatewayService.update_settled``; it answers False when
a shutdown cut that turn short) — so an update whose turn never answered stays unfinished
and replays next run, while one answered before a restart never runs again. Button presses are
done as soon as the sink returns (they start no turn). Cancelling a delivery (``close``)
leaves the update unfinished too.
"""

from __future__ import annotations

import hashlib
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
from core.tasks import TaskSet

_log = logging.getLogger(__name__)

UpdateSettleWait = Callable[[str, str], Awaitable[bool]]
"""``(session_key, update_id)``: wait until the work *this* update started is over — its
own turn's reply delivered, or at once when it started none (a command). True when it ran
to its end; False when a shutdown cut it short (the update then stays unfinished).
``GatewayService.update_settled`` is one."""


class Inbox:
    """Persist-then-deliver of updates for one adapter run."""

    def __init__(
        self,
        store: Store,
        bot: Bot,
        normalizer: Normalizer,
        sink: EventSink,
        update_settled: UpdateSettleWait | None = None,
    ) -> None:
        self.store = store
        self.bot = bot
        self.normalizer = normalizer
        self.sink = sink
        self.update_settled = update_settled
        self._deliveries = TaskSet(_log)

    async def accept(self, update: Update) -> bool:
        """Persist ``update`` and start its delivery; False for an already known update.

        Only storing can fail here (the caller then keeps the update unconfirmed): the
        session key is best effort, and a broken update is delivered — and marked
        ``failed`` — by its own task, never blocking the ones behind it."""
        record = InboundRecord(
            platform=PLATFORM,
            update_id=str(update.update_id),
            session_key=self._key_of(update),
            payload=json.dumps(update.to_dict()),
            received_at=time.time(),
        )
        if not await self.store.enqueue_inbound(record):
            _log.info("telegram update %s already received; not delivered again", update.update_id)
            return False
        await self._deliver(record.update_id, update)
        return True

    def _key_of(self, update: Update) -> str:
        try:
            return self.normalizer.session_key(update)
        except Exception:
            _log.exception("telegram update %s: no session key; stored without", update.update_id)
            return ""

    async def accept_raw(self, data: dict[str, Any]) -> int | None:
        """An update PTB could not parse as part of its batch: parse it alone, or store it
        as ``failed`` (payload kept) so it never blocks the queue. Returns its update id,
        None when it has no readable one (nothing to confirm it by)."""
        update_id = _update_id_of(data)
        if update_id is None:
            await self._reject(unreadable_id(data), data, "no update_id")
            return None
        try:
            update = Update.de_json(data, self.bot)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            await self._reject(str(update_id), data, exc)
            return update_id
        await self.accept(update)
        return update_id

    async def _reject(self, update_id: str, data: dict[str, Any], why: object) -> None:
        _log.error("telegram update %s is unreadable (%s); stored as failed", update_id, why)
        record = InboundRecord(
            PLATFORM, update_id, "", json.dumps(data, default=str), time.time(), state="failed"
        )
        await self.store.enqueue_inbound(record)  # a known id is already stored; kept as is

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
        await self._deliveries.aclose()

    async def drain(self) -> None:
        """Wait until every delivery started so far (and any started meanwhile) has ended."""
        await self._deliveries.drain()

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
        """Start handing ``update`` over; it is stored already, so nothing here may fail
        (a store error on the state change is logged: the update still gets handled)."""
        try:
            await self.store.set_inbound_state(PLATFORM, update_id, "processing")
        except Exception:
            _log.exception("telegram update %s: could not mark it processing", update_id)
        self._deliveries.spawn(
            self._hand_over(update_id, update), name=f"telegram-update-{update_id}"
        )

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
        if event.kind == "button":
            return True
        if self.update_settled is None:
            return True
        return await self.update_settled(str(event.session_key), event.update_id)


def _update_id_of(data: dict[str, Any]) -> int | None:
    try:
        return int(data["update_id"])
    except (KeyError, TypeError, ValueError):
        return None


def unreadable_id(data: dict[str, Any]) -> str:
    """The id an update without a readable ``update_id`` is stored under (its digest)."""
    digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode())
    return f"unreadable-{digest.hexdigest()[:16]}"


async def _answer_unhandled_press(update: Update) -> None:
    """A press we make no event of (no payload) is still answered, or the client spins."""
    if update.callback_query is None:
        return
    try:
        await update.callback_query.answer()
    except TelegramError as exc:
        _log.warning("telegram: could not answer press %s: %s", update.callback_query.id, exc)
