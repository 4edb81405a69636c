"""Every platform's durable inbox: an inbound item is stored first, then delivered, once.

One :class:`DurableInbox` serves every platform; what differs is data — an
:class:`ItemFormat` (how an item is named, written and read back) and a :data:`Handle`
(how it reaches the gateway). States of one item in the store's inbound queue::

    (received) --accept: enqueue_inbound--> pending --deliver--> processing
    (unreadable, or refused by the store max_attempts times) --> dead letter (never queued)

    processing --handled, nothing delivered (event None)---------> done
               --handled, its receipt says True------------------> done
               --handled, its receipt says False-----------------> processing (replays)
               --delivery cancelled (close)----------------------> processing (replays)
               --the handle raised-------------------------------> failed (+ dead letter)

    pending | processing --replay on start--> processing again
                         (unreadable payload: failed + dead letter; nothing for us: done)
    processing --handed over (its receipt: another process handles it)--> processing
               (this run neither marks it nor replays it: the other process marks it done;
               a cluster's sweeper redelivers it if nobody does, docs/cluster.md) — or
               done at once when its event is another item's (an album's later part
               folded into the first part's event, which the other process marks)

Only after :meth:`DurableInbox.accept` returns may the caller let the platform consider
the item received (advance an offset, answer 200, acknowledge an envelope). A duplicate id
(a redelivery after a restart, a retried POST) is refused by the store and never delivered
twice. Each item is handed over in its own tracked task, started in arrival order, so a
long-running sink call never blocks a later ``/stop``. The event handed over carries its
:class:`~adapters.base.Receipt`; the item is marked done once the handle returned *and* the
receipt says True — at once for what the sink handled whole (a command, a press, a folded
or refused message), after the reply's delivery for a turn: an item whose turn a shutdown
cut short replays next run, one answered before a restart never runs again. The sink (the
gateway's Router) answers its own failures in the chat and never raises, so ``failed`` is
for items whose handling raised anyway.

Taking one inbound item into the store (:meth:`Intake.take`) ends one of these ways::

    stored        the item is in the store (new)              → the caller confirms it
    known         the store already had it (a redelivery)     → the caller confirms it;
                  delivered only if no run ever started it (still pending, not in flight)
    quarantined   it could not be stored after ``max_attempts`` tries, or could not be
                  read at all (:meth:`Intake.reject`): kept as a dead letter with its raw
                  form and the error, named by one WARNING    → the caller confirms it
    raises StoreUnavailable   storage is out (disk full, read-only, I/O error), not the
                  item: never counted, never dead-lettered; the chat hears it once per
                  outage (:class:`StorageOutage`)           → the caller leaves it
                  unconfirmed, backs off and gets it again once storage is back
    raises anything else      before ``max_attempts``        → likewise, retried later

An item that cannot be *read* (unparseable, values the store cannot hold, an unknown kind)
is quarantined at its first attempt: reading is a pure function of its bytes, so trying
again cannot help. Operators list and drop dead letters with ``commonos inbox dead`` and
``commonos inbox drop ID``.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Generic, Literal, TypeVar

from adapters.base import ChatRef, InboundEvent
from core.bounded import BoundedMap
from core.store.base import DeadLetter, InboundRecord, InboundState, Store, StoreUnavailable
from core.tasks import TaskSet

_log = logging.getLogger(__name__)

UNFINISHED: frozenset[InboundState] = frozenset({"pending", "processing"})
"""The states an item is delivered (again) from."""
MAX_ATTEMPTS = 3
"""Tries to store one item before it becomes a dead letter."""
ERROR_PREVIEW = 300
"""Characters of an error kept in a log line (the dead letter keeps it whole)."""
STORAGE_NOTICE = "I can't save messages right now; I'll answer when storage is back."
STORABLE_INTEGERS = range(-(2**63), 2**63)
"""What a SQLite INTEGER (and every platform's 64-bit ids) can hold."""
_LONG_NUMBER = re.compile(r"\d{19}")
"""A run of 19 digits: every integer outside 64 bits has one (2**63 has 19 digits)."""

Taken = Literal["stored", "known", "quarantined"]
Notify = Callable[[ChatRef], Awaitable[None]]
"""Send the storage notice to one chat (errors are the callee's to log, never raised)."""
Item = TypeVar("Item")
Handle = Callable[[Item], Awaitable[InboundEvent | None]]
"""Hand one stored item to the gateway (the sink); returns the event it delivered, whose
receipt is then awaited, or None when there was nothing to deliver (done at once)."""
Activity = Callable[[Item, bool], None]
"""Told ``(item, True)`` when its delivery starts and ``(item, False)`` when it is over."""


def preview(error: object, limit: int = ERROR_PREVIEW) -> str:
    """One line, at most ``limit`` characters, of an error (with its type for exceptions)."""
    text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def unstorable_value(data: object) -> str | None:
    """Where in ``data`` (decoded JSON) an integer lies outside 64 bits, e.g.
    ``"message.chat.id"``; None when every value can be stored."""
    return next(_unstorable(data, ""), None)


def unstorable_in_json(raw: str) -> str | None:
    """:func:`unstorable_value` of the JSON text ``raw``; a text with no run of 19 digits
    holds no integer outside 64 bits, and is neither decoded nor walked."""
    if _LONG_NUMBER.search(raw) is None:
        return None
    return unstorable_value(json.loads(raw))


def _unstorable(data: object, path: str) -> Iterator[str]:
    if isinstance(data, bool):
        return
    if isinstance(data, int) and data not in STORABLE_INTEGERS:
        yield path or "(the item)"
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _unstorable(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _unstorable(value, f"{path}[{index}]")


class StorageOutage:
    """While the store cannot write: one notice per chat, and one log line at each end.

    ``hit`` is called for every item refused as :class:`StoreUnavailable`; ``over`` after
    any successful write, which ends the outage (a later one notifies the chats again)."""

    def __init__(self, platform: str, notify: Notify | None, capacity: int = 10_000) -> None:
        self.platform = platform
        self.notify = notify
        self.active = False
        self._told: BoundedMap[ChatRef, bool] = BoundedMap(capacity)

    async def hit(self, chat: ChatRef | None, error: StoreUnavailable) -> None:
        if not self.active:
            self.active = True
            _log.error("%s: the store cannot save messages (%s)", self.platform, preview(error))
        if chat is None or chat in self._told or self.notify is None:
            return
        self._told.put(chat, True)
        await self.notify(chat)

    def over(self) -> None:
        if self.active:
            self.active = False
            self._told.clear()
            _log.warning("%s: the store saves messages again", self.platform)


class Intake:
    """Store-then-confirm of one platform's inbound items, with quarantine and outages."""

    def __init__(
        self,
        store: Store,
        platform: str,
        notify: Notify | None = None,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self.store = store
        self.platform = platform
        self.max_attempts = max_attempts
        self.outage = StorageOutage(platform, notify)
        self._attempts: BoundedMap[str, int] = BoundedMap(1_000)

    async def take(
        self,
        item_id: str,
        raw: str,
        store_it: Callable[[], Awaitable[bool]],
        chat: ChatRef | None = None,
    ) -> Taken:
        """Run ``store_it`` (True: newly stored, False: already known) under the rules in
        the module docstring. ``chat`` is where to tell a storage outage, if anywhere."""
        try:
            new = await store_it()
        except StoreUnavailable as exc:
            await self.outage.hit(chat, exc)
            raise
        except Exception as exc:
            attempts = self._attempts.get(item_id, 0) + 1
            if attempts < self.max_attempts:
                self._attempts.put(item_id, attempts)
                raise
            await self._bury(item_id, raw, exc, attempts)
            return "quarantined"
        self._attempts.pop(item_id, None)
        if self.outage.active:  # this write ends it
            self.outage.over()
        return "stored" if new else "known"

    async def reject(self, item_id: str, raw: str, error: object) -> Taken:
        """Quarantine an item that cannot be read at once (trying again cannot help).

        Raises :class:`StoreUnavailable` when even the dead letter cannot be written: the
        item then stays unconfirmed like any other during an outage."""
        await self._bury(item_id, raw, error, 1)
        return "quarantined"

    async def _bury(self, item_id: str, raw: str, error: object, attempts: int) -> None:
        self._attempts.pop(item_id, None)
        error_text = preview(error, 4000)
        letter = DeadLetter(self.platform, item_id, raw, error_text, attempts, time.time())
        try:
            letter_id = await self.store.add_dead_letter(letter)
        except StoreUnavailable:
            raise
        except Exception as exc:  # it is dropped all the same: never block the queue
            _log.error(
                "%s item %s dropped; it could not be kept as a dead letter (%s)",
                self.platform,
                item_id,
                preview(exc),
            )
            return
        if letter_id is None:
            _log.info("%s item %s is already a dead letter", self.platform, item_id)
            return
        self.outage.over()
        _log.warning(
            "%s item %s quarantined as dead letter %d after %d attempt(s): %s "
            "(see `commonos inbox dead`)",
            self.platform,
            item_id,
            letter_id,
            attempts,
            preview(error),
        )


def notice_chat(event: InboundEvent | None) -> ChatRef | None:
    """Where to tell that the store is out: only a chat that spoke to the bot (a DM, a
    command, a press, a mention or a reply to it), never for a bot's message."""
    if event is None or event.sender.is_bot:
        return None
    addressed = event.chat_type == "dm" or event.kind != "text"
    return event.chat if addressed or event.mentioned or event.reply_to_bot else None


@dataclass(frozen=True, slots=True)
class ItemFormat(Generic[Item]):
    """How one platform's items are named, written to and read back from the inbound queue."""

    platform: str
    noun: str
    """What one item is called in log lines (``"telegram update 7 ..."``)."""
    id_of: Callable[[Item], str]
    """The id the store refuses a second time (unique per platform)."""
    to_json: Callable[[Item], str]
    """The payload stored, which :attr:`revive` reads back (also a dead letter's raw form)."""
    revive: Callable[[InboundRecord], Item | None]
    """A stored item again; None when it is nothing for us any more (marked done). Raises
    when the payload cannot be read (marked failed and kept as a dead letter)."""


class DurableInbox(Generic[Item]):
    """Persist-then-deliver of one platform's items for one adapter run (the states are
    drawn in the module docstring)."""

    def __init__(
        self,
        store: Store,
        form: ItemFormat[Item],
        handle: Handle[Item],
        *,
        notify: Notify | None = None,
        activity: Activity[Item] | None = None,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self.store, self.form, self.handle = store, form, handle
        self.activity = activity
        self.intake = Intake(store, form.platform, notify, max_attempts)
        """Quarantine and storage outages (``notify`` tells a chat the store is out)."""
        self._deliveries = TaskSet(_log)
        self._in_flight: set[str] = set()

    @property
    def in_flight(self) -> frozenset[str]:
        """The ids of the items whose delivery runs in this run now."""
        return frozenset(self._in_flight)

    async def accept(self, item: Item, session_key: str, chat: ChatRef | None = None) -> bool:
        """Store ``item`` and start its delivery; False when it is not delivered (already
        known, or quarantined as a dead letter). ``chat``: where to tell a storage outage.

        Raises when it could not be stored *yet* (the store is out, or failed fewer than
        ``max_attempts`` times): the caller leaves it unconfirmed and gets it again."""
        item_id, raw = self.form.id_of(item), self.form.to_json(item)
        record = InboundRecord(self.form.platform, item_id, session_key, raw, time.time())
        taken = await self.intake.take(
            item_id, raw, partial(self.store.enqueue_inbound, record), chat
        )
        if taken == "known":
            return await self._deliver_if_never_started(item_id, item)
        if taken != "stored":
            return False
        await self._deliver(item_id, item)
        return True

    async def _deliver_if_never_started(self, item_id: str, item: Item) -> bool:
        """A redelivered item the store already holds: delivered only if no run ever started
        it (still ``pending`` and not in flight here) — an enqueue cut off by a storage
        outage or a cancelled receiver may have committed after this run's replay had read
        its list, and nothing else would hand it over."""
        name = self._name(item_id)
        if item_id not in self._in_flight:
            record = await self.store.get_inbound(self.form.platform, item_id)
            if record is not None and record.state == "pending":
                _log.info("%s was stored but never delivered; delivering it now", name)
                await self._deliver(item_id, item)
                return True
        _log.info("%s already received; not delivered again", name)
        return False

    async def replay(self) -> int:
        """Deliver what a previous run left pending or processing; returns how many.

        Each item is read again just before: with several processes on one store
        (docs/cluster.md) another may have finished it since the list was read, and
        delivering it would make it ``processing`` again."""
        records = await self.store.unfinished_inbound(self.form.platform)
        replayed = 0
        for listed in records:
            record = await self.store.get_inbound(self.form.platform, listed.update_id)
            if record is None or record.state not in UNFINISHED:
                continue
            if record.update_id in self._in_flight:
                continue  # a redelivery started it meanwhile
            await self._resume(record)
            replayed += 1
        if replayed:
            platform, noun = self.form.platform, self.form.noun
            _log.info("%s: replaying %d unfinished %s(s)", platform, replayed, noun)
        return replayed

    async def redeliver(self, records: Sequence[InboundRecord]) -> int:
        """Deliver ``records`` (unfinished items, e.g. ones another process left) again,
        skipping those in flight in this run; returns how many were delivered."""
        fresh = [record for record in records if record.update_id not in self._in_flight]
        for record in fresh:
            await self._resume(record)
        if fresh:
            platform, noun = self.form.platform, self.form.noun
            _log.info("%s: delivering %d unfinished %s(s) again", platform, len(fresh), noun)
        return len(fresh)

    async def close(self) -> None:
        """Cancel deliveries in flight; their items stay unfinished for the next run."""
        await self._deliveries.aclose()

    async def drain(self) -> None:
        """Wait until every delivery started so far (and any started meanwhile) has ended."""
        await self._deliveries.drain()

    async def _resume(self, record: InboundRecord) -> None:
        try:
            item = self.form.revive(record)
        except Exception as exc:
            name = self._name(record.update_id)
            _log.error("%s in the store is unreadable (%s); marked failed, kept", name, exc)
            await self.store.set_inbound_state(self.form.platform, record.update_id, "failed")
            await self.intake.reject(record.update_id, record.payload, exc)
            return
        if item is None:
            await self.store.set_inbound_state(self.form.platform, record.update_id, "done")
            return
        await self._deliver(record.update_id, item)

    async def _deliver(self, item_id: str, item: Item) -> None:
        """Start handing ``item`` over; it is stored already, so nothing here may fail (a
        store error on the state change is logged: the item still gets handled). It is in
        flight from the first await on, so a redelivery meanwhile does not start it twice."""
        self._in_flight.add(item_id)
        try:
            await self.store.set_inbound_state(self.form.platform, item_id, "processing")
        except Exception:
            _log.exception("%s: could not mark it processing", self._name(item_id))
        except BaseException:
            self._in_flight.discard(item_id)
            raise
        name = f"{self.form.platform}-{self.form.noun}-{item_id}"
        task = self._deliveries.spawn(self._hand_over(item_id, item), name=name)
        task.add_done_callback(lambda _: self._in_flight.discard(item_id))

    async def _hand_over(self, item_id: str, item: Item) -> None:
        state: InboundState = "done"
        if self.activity is not None:
            self.activity(item, True)
        try:
            event = await self.handle(item)
            if event is not None:
                event.receipt.sink_returned()  # whole now, unless it follows a turn
                if not await event.receipt.wait():  # its handling did not run to its end
                    if not event.receipt.handed_over:
                        _log.info("%s: work cut short; replays next run", self._name(item_id))
                        return
                    _log.debug("%s: handed over to another process", self._name(item_id))
                    if event.update_id == item_id:
                        return  # the other process marks it done
                    # folded into another item's event (an album's part): that item stands
                    # for it from now on; only its done mark is the other process's
        except Exception as exc:
            _log.exception("%s: handling failed", self._name(item_id))
            state = "failed"
            await self._bury(item_id, item, exc)
        finally:
            if self.activity is not None:
                self.activity(item, False)
        await self._mark(item_id, state)

    async def _mark(self, item_id: str, state: InboundState) -> None:
        try:
            await self.store.set_inbound_state(self.form.platform, item_id, state)
        except StoreUnavailable as exc:
            _log.warning("%s: not marked %s (%s)", self._name(item_id), state, preview(exc))

    async def _bury(self, item_id: str, item: Item, error: Exception) -> None:
        try:
            await self.intake.reject(item_id, self.form.to_json(item), error)
        except Exception:
            _log.exception("%s: could not keep it as a dead letter", self._name(item_id))

    def _name(self, item_id: str) -> str:
        return f"{self.form.platform} {self.form.noun} {item_id}"
