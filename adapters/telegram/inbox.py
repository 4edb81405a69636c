"""Telegram's front of the shared durable inbox (:class:`adapters.inbox.DurableInbox`,
whose docstring draws the states): what only Telegram's updates need.

* An update is checked before it is stored: an unusable ``update_id``, an integer the store
  cannot hold, or a kind of update PTB does not know make it a dead letter at once (one
  without a usable id is kept under a digest, :func:`unreadable_id`).
* A batch PTB could not parse is taken apart (:meth:`Inbox.accept_raw`), and the updates
  behind one the store refused still tell their chats of the outage
  (:meth:`Inbox.held_back`).
* The parts of an album (one ``media_group_id``) are stored one update each and handed
  over as one folded event (:mod:`adapters.telegram.albums`): each part's item settles
  with that event's receipt, and a replay folds the unfinished parts again.
* Stored updates are PTB ``Update`` objects (their ``to_dict``). Each is normalized once
  (:class:`Normalized`): on arrival, before it is stored (its session key is stored with
  it), or when a later run revives it; the event handed over is that one. A press we make
  no event of is still answered, and ends ``done``.
* A ``stopped_message_generation`` (a draft's Stop, Bot API 10.3: in ``api_kwargs``) is
  stored like any update; its ``stop`` event is handed over only when ``live_stop`` says the
  draft is the chat's live one (:meth:`adapters.telegram.drafts.DraftStreams.stop`), else it
  ends ``done`` having changed nothing — so a stop replayed after a restart, whose stream
  died with the old run, changes nothing.

Only after ``accept`` returns may the caller let Telegram consider the update confirmed
(advance the getUpdates offset, or answer the webhook 200). A duplicate ``update_id``
(Telegram redelivering after a restart) is refused by the store and never delivered twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from telegram import Bot, Update
from telegram.error import TelegramError

from adapters.base import EventSink, InboundEvent
from adapters.inbox import (
    MAX_ATTEMPTS,
    STORABLE_INTEGERS,
    DurableInbox,
    ItemFormat,
    Notify,
    notice_chat,
    unstorable_in_json,
)
from adapters.telegram.albums import Albums
from adapters.telegram.normalize import PLATFORM, STOP_UPDATE, Normalizer
from core.store.base import InboundRecord, Store, StoreUnavailable

_log = logging.getLogger(__name__)


LiveStop = Callable[[InboundEvent], bool]
"""Whether a ``stop`` event is for a live stream (it then is that stream's one stop)."""


def no_live_stream(event: InboundEvent) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class Normalized:
    """An update with the event it normalizes to (None: nothing for us) and its stored JSON,
    each made once."""

    update: Update
    event: InboundEvent | None
    raw: str
    """The payload stored (``update.to_dict()`` as JSON; a revived update's as read)."""


class Inbox:
    """Persist-then-deliver of updates for one adapter run."""

    def __init__(
        self,
        store: Store,
        bot: Bot,
        normalizer: Normalizer,
        sink: EventSink,
        notify: Notify | None = None,
        max_attempts: int = MAX_ATTEMPTS,
        albums: Albums | None = None,
        live_stop: LiveStop = no_live_stream,
    ) -> None:
        self.bot, self.normalizer, self.sink = bot, normalizer, sink
        self.live_stop = live_stop
        self.albums = albums or Albums(sink)
        form = ItemFormat(PLATFORM, "update", _update_key, attrgetter("raw"), self._revive)
        self.queue = DurableInbox(
            store, form, self._handle, notify=notify, max_attempts=max_attempts
        )
        self.intake = self.queue.intake

    async def accept(self, update: Update, data: dict[str, Any] | None = None) -> bool:
        """Persist ``update`` and start its delivery; False when it is not delivered
        (already known, or quarantined as a dead letter). ``data``: the update as Telegram
        sent it, when the caller has it — stored as it is (else serialised from ``update``).

        Raises when it could not be stored *yet* (the store is out, or failed fewer than
        ``max_attempts`` times): the caller keeps the update unconfirmed and tries again."""
        raw, whole = _raw_json(update, data)
        usable = usable_update_id(update.update_id) is not None
        item = str(update.update_id) if usable else unreadable_id(json.loads(raw))
        problem = _unreadable(update, raw) if usable else _unusable_id(update)
        if problem is not None:
            await self.intake.reject(item, raw, problem)
            return False
        try:
            event = self.normalizer.event(update, raw if whole else None)
        except Exception as exc:
            await self.intake.reject(item, raw, exc)
            return False
        key = str(event.session_key) if event is not None else ""
        return await self.queue.accept(Normalized(update, event, raw), key, notice_chat(event))

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
        await self.accept(update, data)
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
        return await self.queue.replay()

    async def close(self) -> None:
        """Cancel deliveries in flight; their updates stay unfinished for the next run."""
        await self.queue.close()

    async def drain(self) -> None:
        """Wait until every delivery started so far (and any started meanwhile) has ended."""
        await self.queue.drain()

    def _revive(self, record: InboundRecord) -> Normalized:
        data: dict[str, Any] = json.loads(record.payload)
        update = Update.de_json(data, self.bot)
        return Normalized(update, self.normalizer.event(update, record.payload), record.payload)

    async def _handle(self, item: Normalized) -> InboundEvent | None:
        if item.event is None:
            await _answer_unhandled_press(item.update)
            return None
        if item.event.kind == "stop" and not self.live_stop(item.event):
            return None  # its stream is over (or of an earlier run): nothing to stop
        group = item.update.message.media_group_id if item.update.message else None
        if group is not None:
            return await self.albums.add(group, item.event)
        await self.sink(item.event)
        return item.event


def usable_update_id(update_id: object) -> int | None:
    """``update_id`` when it can confirm an update (a non-negative 64-bit integer); None
    for anything else — moving the getUpdates offset by it would skip real updates."""
    if isinstance(update_id, bool) or not isinstance(update_id, int):
        return None
    return update_id if 0 <= update_id < STORABLE_INTEGERS.stop - 1 else None


def _update_key(item: Normalized) -> str:
    return str(item.update.update_id)


def _update_id_of(data: dict[str, Any]) -> int | None:
    return usable_update_id(data.get("update_id"))


def _raw_json(update: Update, data: dict[str, Any] | None) -> tuple[str, bool]:
    """The update's JSON as stored (``data`` as sent, else PTB's own), and whether it is
    whole (else: its id and why the rest is missing)."""
    try:
        return json.dumps(update.to_dict() if data is None else data, default=str), True
    except Exception as exc:  # keep what can be kept: the id and why the rest is missing
        kept = {"update_id": str(update.update_id), "unserialisable": repr(exc)}
        return json.dumps(kept), False


def _unusable_id(update: Update) -> str:
    return f"update_id {update.update_id!r} is not a usable id"


def _unreadable(update: Update, raw: str) -> str | None:
    """Why ``update`` (its id usable) cannot be taken in (None: it can): an integer the
    store cannot hold, or a kind of update PTB does not know."""
    where = unstorable_in_json(raw)
    if where is not None:
        return f"integer out of the 64-bit range at {where}"
    known = update.message is not None or STOP_UPDATE in update.api_kwargs
    if not known and all(getattr(update, kind, None) is None for kind in Update.ALL_TYPES):
        kinds = sorted(key for key in update.api_kwargs if key != "update_id")
        return f"unknown update type ({', '.join(kinds) or 'no content'})"
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
