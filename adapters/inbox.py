"""What every platform's inbox shares: poison items are quarantined, a store outage is
waited out with one notice per chat.

Taking one inbound item into the store (:meth:`Intake.take`) ends one of these ways::

    stored        the item is in the store (new)              → the caller confirms it
    known         the store already had it (a redelivery)     → the caller confirms it
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

import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Literal

from adapters.base import ChatRef
from core.bounded import BoundedMap
from core.store.base import DeadLetter, Store, StoreUnavailable

_log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
"""Tries to store one item before it becomes a dead letter."""
ERROR_PREVIEW = 300
"""Characters of an error kept in a log line (the dead letter keeps it whole)."""
STORAGE_NOTICE = "I can't save messages right now; I'll answer when storage is back."
STORABLE_INTEGERS = range(-(2**63), 2**63)
"""What a SQLite INTEGER (and every platform's 64-bit ids) can hold."""

Taken = Literal["stored", "known", "quarantined"]
Notify = Callable[[ChatRef], Awaitable[None]]
"""Send the storage notice to one chat (errors are the callee's to log, never raised)."""


def preview(error: object, limit: int = ERROR_PREVIEW) -> str:
    """One line, at most ``limit`` characters, of an error (with its type for exceptions)."""
    text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def unstorable_value(data: object) -> str | None:
    """Where in ``data`` (decoded JSON) an integer lies outside 64 bits, e.g.
    ``"message.chat.id"``; None when every value can be stored."""
    return next(_unstorable(data, ""), None)


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
