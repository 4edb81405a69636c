"""The durable inbox: persist an update first, then deliver it, once per ``update_id``.

States of one update in the store's inbound queue (``_deliver``, ``_hand_over``,
``_settle``)::

    (fetched) --enqueue_inbound--> pending --_deliver--> processing
    (unreadable: unparseable, unknown type, a value the store cannot hold,
     or refused by the store MAX_ATTEMPTS times) --> dead letter (never in the queue)

    processing --nothing for us (event None)-------------> done
               --sink returned, settled True-------------> done
               --sink returned, settled False------------> processing  (replays next run)
               --delivery cancelled (close)--------------> processing  (replays next run)
               --normalize, sink or settle wait raised---> failed

    pending | processing --replay on start--> processing again  (unreadable payload: failed)

Every ``failed`` update is also kept as a dead letter with the error. Storing goes through
the shared :class:`adapters.inbox.Intake`: a poison update is quarantined and confirmed, a
store outage (disk full, read-only) leaves it unconfirmed — the chat is told once — so it
is fetched again, and answered, once storage is back.

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
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from telegram import Bot, Update
from telegram.error import TelegramError

from adapters.base import ChatRef, EventSink, InboundEvent
from adapters.inbox import (
    MAX_ATTEMPTS,
    STORABLE_INTEGERS,
    Intake,
    Notify,
    preview,
    unstorable_value,
)
from adapters.telegram.normalize import PLATFORM, Normalizer
from core.store.base import InboundRecord, InboundState, Store, StoreUnavailable
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
        notify: Notify | None = None,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self.store = store
        self.bot = bot
        self.normalizer = normalizer
        self.sink = sink
        self.update_settled = update_settled
        self.intake = Intake(store, PLATFORM, notify, max_attempts)
        """Quarantine and storage outages (``notify`` tells a chat the store is out)."""
        self._deliveries = TaskSet(_log)

    async def accept(self, update: Update) -> bool:
        """Persist ``update`` and start its delivery; False when it is not delivered
        (already known, or quarantined as a dead letter).

        Raises when it could not be stored *yet* (the store is out, or failed fewer than
        ``max_attempts`` times): the caller keeps the update unconfirmed and tries again."""
        raw = _raw_json(update)
        item = str(update.update_id)
        if usable_update_id(update.update_id) is None:
            item = unreadable_id(json.loads(raw))
        problem = _unreadable(update, raw)
        if problem is not None:
            await self.intake.reject(item, raw, problem)
            return False
        try:
            event = self.normalizer.event(update)
        except Exception as exc:
            await self.intake.reject(item, raw, exc)
            return False
        key = str(event.session_key) if event is not None else ""
        record = InboundRecord(PLATFORM, item, key, raw, time.time())
        taken = await self.intake.take(
            item, raw, lambda: self.store.enqueue_inbound(record), notice_chat(event)
        )
        if taken == "known":
            _log.info("telegram update %s already received; not delivered again", item)
        if taken != "stored":
            return False
        await self._deliver(item, update)
        return True

    async def accept_raw(self, data: dict[str, Any]) -> int | None:
        """An update PTB could not parse as part of its batch: parse it alone, or quarantine
        it (payload kept) so it never blocks the queue. Returns its update id, None when it
        has no usable one (nothing to confirm it by)."""
        update_id = _update_id_of(data)
        raw = json.dumps(data, default=str)
        if update_id is None:
            await self.intake.reject(unreadable_id(data), raw, "no usable update_id")
            return None
        try:
            update = Update.de_json(data, self.bot)
        except Exception as exc:
            await self.intake.reject(str(update_id), raw, exc)
            return update_id
        await self.accept(update)
        return update_id

    async def held_back(self, updates: Sequence[object], error: StoreUnavailable) -> None:
        """Updates behind one the store refused are not tried (they would overtake it): their
        chats are told of the outage all the same, once each."""
        for update in updates:
            if not isinstance(update, Update):
                continue
            try:
                event = self.normalizer.event(update)
            except Exception:
                continue  # it is quarantined when its turn to be stored comes
            await self.intake.outage.hit(notice_chat(event), error)

    async def replay(self) -> int:
        """Deliver the updates a previous run left unfinished; returns how many."""
        records = await self.store.unfinished_inbound(PLATFORM)
        for record in records:
            update = self._revive(record)
            if update is None:
                await self.store.set_inbound_state(PLATFORM, record.update_id, "failed")
                why = "unreadable in the store"
                await self.intake.reject(record.update_id, record.payload, why)
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
        except Exception as exc:
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
        except Exception as exc:
            _log.exception("telegram update %s: event handling failed", update_id)
            state = "failed"
            await self._bury(update_id, update, exc)
        try:
            await self.store.set_inbound_state(PLATFORM, update_id, state)
        except StoreUnavailable as exc:
            _log.warning("telegram update %s: not marked %s (%s)", update_id, state, preview(exc))

    async def _bury(self, update_id: str, update: Update, error: Exception) -> None:
        try:
            await self.intake.reject(update_id, _raw_json(update), error)
        except Exception:
            _log.exception("telegram update %s: could not keep it as a dead letter", update_id)

    async def _settle(self, event: InboundEvent) -> bool:
        if event.kind == "button":
            return True
        if self.update_settled is None:
            return True
        return await self.update_settled(str(event.session_key), event.update_id)


def usable_update_id(update_id: object) -> int | None:
    """``update_id`` when it can confirm an update (a non-negative 64-bit integer); None
    for anything else — moving the getUpdates offset by it would skip real updates."""
    if isinstance(update_id, bool) or not isinstance(update_id, int):
        return None
    return update_id if 0 <= update_id < STORABLE_INTEGERS.stop - 1 else None


def _update_id_of(data: dict[str, Any]) -> int | None:
    return usable_update_id(data.get("update_id"))


def _raw_json(update: Update) -> str:
    try:
        return json.dumps(update.to_dict(), default=str)
    except Exception as exc:  # keep what can be kept: the id and why the rest is missing
        return json.dumps({"update_id": str(update.update_id), "unserialisable": repr(exc)})


def _unreadable(update: Update, raw: str) -> str | None:
    """Why ``update`` cannot be taken in (None: it can): an unusable id, an integer the
    store cannot hold, or a kind of update PTB does not know."""
    if usable_update_id(update.update_id) is None:
        return f"update_id {update.update_id!r} is not a usable id"
    where = unstorable_value(json.loads(raw))
    if where is not None:
        return f"integer out of the 64-bit range at {where}"
    if all(getattr(update, kind, None) is None for kind in Update.ALL_TYPES):
        kinds = sorted(key for key in update.api_kwargs if key != "update_id")
        return f"unknown update type ({', '.join(kinds) or 'no content'})"
    return None


def notice_chat(event: InboundEvent | None) -> ChatRef | None:
    """Where to tell that the store is out: only a chat that spoke to the bot (a DM, a
    command, a press, a mention or a reply to it), never for a bot's message."""
    if event is None or event.sender.is_bot:
        return None
    addressed = event.chat_type == "dm" or event.kind != "text"
    return event.chat if addressed or event.mentioned or event.reply_to_bot else None


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
