"""The sweeper: inbound items nobody is running any more are delivered again (docs/cluster.md).

An item stored by a bot's owner is forwarded to the process holding its session
(:mod:`gateway.cluster.sink`) and marked done there. When that process dies, is paused past
its lease, or cut the work short at a shutdown, the item stays ``pending`` or
``processing``. On each heartbeat tick the owner of a bot looks at that bot's unfinished
items and delivers again (:meth:`adapters.inbox.DurableInbox.redeliver`, through the
cluster sink, so claim-or-forward places it anew) each one that is

* older than one tick (a fresh item is still on its first way),
* not in flight in this process (its delivery or its handling runs here),
* of a session whose lease is not live (no process is running it: a live holder marks
  it done, or releases the lease and the next tick delivers it).

The store's unique (platform, update id) and the sink's drop of done and in-flight items
keep a redelivery from running twice what did run; an item is read again after its lease
was found not live (a holder marks it done before releasing), so one finished meanwhile is
not delivered again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Protocol

from adapters.inbox import UNFINISHED, DurableInbox
from core.store.base import InboundRecord, Store
from gateway.cluster.leases import Holder
from gateway.cluster.sink import ItemKey, session_lease

logger = logging.getLogger(__name__)


class Holders(Protocol):
    async def holder(self, name: str) -> Holder | None: ...


class Sweeper:
    """Redelivers the unfinished items of the bots this process owns."""

    def __init__(
        self,
        store: Store,
        leases: Holders,
        in_flight: Callable[[], Collection[ItemKey]],
        *,
        age: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``age``: seconds an item must have waited (one heartbeat tick); ``clock``: wall
        time, as the store's ``received_at``."""
        self._store, self._leases, self._in_flight = store, leases, in_flight
        self.age = age
        self._clock = clock
        self.redelivered = 0

    async def sweep(self, inboxes: Iterable[DurableInbox[Any]]) -> int:
        """Deliver again what is due in each owned bot's inbox; how many."""
        total = 0
        for inbox in inboxes:
            due = await self.due(inbox.form.platform, inbox.in_flight)
            if due:
                total += await inbox.redeliver(due)
        self.redelivered += total
        return total

    async def due(self, platform: str, delivering: Collection[str]) -> list[InboundRecord]:
        """The unfinished items of ``platform`` that nobody runs (module docstring)."""
        records = await self._store.unfinished_inbound(platform)
        oldest = self._clock() - self.age
        running = self._in_flight()
        candidates = [
            record
            for record in records
            if record.received_at <= oldest
            and record.update_id not in delivering
            and (platform, record.update_id) not in running
        ]
        return await self._unheld(candidates)

    async def _unheld(self, records: Sequence[InboundRecord]) -> list[InboundRecord]:
        """Those of ``records`` whose session lease is not live and which are still
        unfinished once that is known: a holder marks an item done *before* it releases
        the lease, so an item read unfinished earlier may be done by now (and delivering
        it would make it ``processing`` again)."""
        live: dict[str, bool] = {}
        due = []
        for record in records:
            key = record.session_key
            if key not in live:
                holder = await self._leases.holder(session_lease(key)) if key else None
                live[key] = holder is not None and holder.live
            if live[key]:
                continue
            now = await self._store.get_inbound(record.platform, record.update_id)
            if now is not None and now.state in UNFINISHED:
                due.append(now)
        return due
