"""Claim-or-forward: every inbound event runs on the process holding its session's lease.

With several processes on one PostgreSQL store (docs/cluster.md) a session's turns run in
one process at a time: the holder of the lease ``session:<session key>``. Every event of a
leased bot, on whichever process receives it (the bot's owner polls it; another process
may be forwarded it), passes the inbound stage ``cluster_claim`` (:class:`ClusterClaim`,
right after ``received``, :mod:`gateway.inbound.stages`) before the rest of the fold::

    per-process platform (web, terminal)  → the rest of the fold, here (never leased) — but a
                                            linked person's DM (``link:dm:``) takes
                                            its session lease, here: waits for it
    the session is held here (valid)      → run here
    another live process holds it         → forward: mail "event" to it; the event's
                                            receipt is "handed over" (this inbox neither
                                            marks the item nor replays it)
    free or expired                       → claim it for the least busy live process
                                            (maybe this one): ours → run here, else forward

Running here: an event already done in the store, or the same (platform, update id) in
flight here (a replay racing its first delivery), is dropped. A text message that comes
while the session's last reply is still being delivered (a relayed reply takes a round
trip through the bot's owner, and its user may answer it at once) waits for that delivery
to end, so it starts a turn instead of queueing behind one that is over. Otherwise the rest
of the fold gets a copy of the event with a receipt of its own, under ``fenced(session
fence)`` — that call, the dispatcher's turn it starts and everything that turn writes or
relays carry the fence, so a process that lost the lease (paused past its ttl) is refused.
Once the copy's receipt is True the item is marked done *under the session fence*: that write is the
arbiter — refused (``Fenced``: another process runs the session now) the event's own
receipt is handed over, not settled, so nothing marks it done here and another delivery
runs it; True otherwise, False when the work was cut short (a later delivery runs it).
Then, when the session has no turn running or queued and no event in flight here, its
lease is released: the next event of that chat may go to any process.

A mail of kind ``event`` (a forwarded event) enters the whole inbound fold here (it is
received here too: this process's bot learns the chat's kind) and takes the same path; it
may be forwarded on when the lease moved meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol

from adapters.base import EventSink, InboundEvent, Receipt
from core.store.base import Store, StoreError
from core.store.fencing import Fence, Fenced, current_fence, fenced
from core.store.pg_connection import DRIVER_ERRORS
from core.tasks import TaskSet
from gateway.cluster.codec import decode_event, encode_event
from gateway.cluster.leases import SESSION_PREFIX, Holder
from gateway.cluster.mailbox import Mail
from gateway.inbound.stages import Next

logger = logging.getLogger(__name__)

#: What a lease check may raise while the store cannot answer: the reply still goes.
_UNCHECKED: tuple[type[BaseException], ...] = (StoreError, *DRIVER_ERRORS)

EVENT = "event"
"""The mail kind of a forwarded inbound event (payload: :func:`encode_event`)."""
HERE_RETRY_SECONDS = 0.5
"""How often a linked person's web or terminal message tries again for its session's lease
while another process runs that session."""
PLACEMENT_TRIES = 3
"""Rounds of holder / claim / acquire before an event is left for a later delivery."""

ItemKey = tuple[str, str]
"""An inbound item: (platform, update id)."""


def session_lease(session_key: str) -> str:
    """The lease name of a session (``session:<session key>``)."""
    return f"{SESSION_PREFIX}{session_key}"


class SessionLeases(Protocol):
    """What the sink asks of :class:`gateway.cluster.leases.Leases`."""

    async def acquire(self, name: str) -> Fence | None: ...
    async def claim(self, name: str, owner: str) -> Holder: ...
    async def holder(self, name: str) -> Holder | None: ...
    async def release(self, fence: Fence) -> None: ...
    def valid(self, fence: Fence) -> bool: ...
    def fence_of(self, name: str) -> Fence | None: ...
    def held(self) -> list[Fence]: ...


class Placement(Protocol):
    """Where a new session goes (:meth:`gateway.cluster.members.Members.least_busy`)."""

    async def least_busy(self) -> str: ...


class Post(Protocol):
    """Mail to another process (:meth:`gateway.cluster.mailbox.Mailbox.send`)."""

    async def send(self, target: str, kind: str, payload: str) -> int: ...


@dataclass(slots=True)
class SinkStats:
    """Counters since start."""

    forwarded: int = 0
    received: int = 0
    """Events mailed to this process by another."""
    dropped: int = 0
    """Events already done, or in flight here."""
    lost: int = 0
    """Session fences found lost (a write refused, or the renewal dropped them)."""


@dataclass(slots=True)
class _Session:
    """One session as this process sees it: decisions about it take ``lock`` (so a release
    never races an event that is being placed here)."""

    lock: asyncio.Lock
    users: int = 0
    """Events being placed or run here (the entry is dropped at 0)."""
    running: int = 0
    """Events placed here whose handling has not ended."""


class ClusterClaim:
    """The stage ``cluster_claim`` of a cluster process's inbound fold (claim-or-forward)."""

    def __init__(
        self,
        *,
        store: Store,
        leases: SessionLeases,
        members: Placement,
        mailbox: Post,
        process_id: str,
        leased_platforms: Callable[[], frozenset[str]],
        busy: Callable[[str], bool],
        delivered: Callable[[str], Awaitable[None]] | None = None,
        key_of: Callable[[InboundEvent], str] | None = None,
        taken: Callable[[str], None] | None = None,
    ) -> None:
        """``leased_platforms``: the platforms whose bots are leased (the rest are per
        process: straight on); ``busy(session_key)``: a turn of it runs or
        waits here (the dispatcher's lanes); ``delivered(session_key)``: returns once the
        session's last reply, if it is still being delivered here, is out (a text message
        waits for it rather than queue behind a turn that has ended); ``key_of(event)``:
        the session key its turn runs under (a linked identity's direct message runs in its
        person's ``link:dm:`` session, gateway/control/links.py), default the event's own;
        ``taken(session_key)``: this process has just taken the session's lease (it was
        free, expired or another's), so what it kept in memory of the session may have
        changed on another process meanwhile (its settings: a ``/model`` made there)."""
        self.stats = SinkStats()
        self.process_id = process_id
        self._store, self._leases, self._members = store, leases, members
        self._mailbox = mailbox
        self._leased = leased_platforms
        self._busy = busy
        self._delivered = delivered
        self._key_of = key_of or _own_key
        self._taken = taken
        self._sessions: dict[str, _Session] = {}
        self._in_flight: set[ItemKey] = set()
        self._warned: set[Fence] = set()
        self._released: set[Fence] = set()
        self._mailed: dict[str, asyncio.Task[None]] = {}
        """The last mailed event of each session still being placed (they go in order)."""
        self._settling = TaskSet(logger)

    async def __call__(self, event: InboundEvent, next: Next) -> None:
        if event.platform in self._leased():
            await self._place(event, next)
        elif self._key_of(event) != str(event.session_key):
            await self._place_here(event, next)
        else:
            await next(event)

    async def _place_here(self, event: InboundEvent, next: Next) -> None:
        """A linked person's web or terminal direct message: it runs in the person's
        session (``link:dm:<person>``), under the same lease as their other platforms'
        messages, and on this process, which has its chat. A message whose session another
        process holds waits here until the lease is free (:data:`HERE_RETRY_SECONDS`); a
        command or press is placed like a leased event (``/stop`` is forwarded to the
        turn it stops)."""
        name = session_lease(self._key_of(event))
        if event.kind != "text" or await self._take_here(name):
            await self._place(event, next)
            return
        outcome: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        event.receipt.follow(outcome)
        label = f"cluster-wait-{event.platform}-{event.update_id}"
        self._settling.spawn(self._when_free(event, name, outcome, next), name=label)

    async def _take_here(self, name: str) -> bool:
        """The session lease is (now) this process's; False while another holds it."""
        fence = self._leases.fence_of(name)
        if fence is not None and self._leases.valid(fence):
            return True
        return await self._acquire(name) is not None

    async def _until_held(self, name: str) -> None:
        """Until the lease is this process's (the store is asked: no event to wait on)."""
        while True:
            if await self._take_here(name):
                return
            await asyncio.sleep(HERE_RETRY_SECONDS)

    async def _when_free(
        self, event: InboundEvent, name: str, outcome: asyncio.Future[bool], next: Next
    ) -> None:
        copy = replace(event, receipt=Receipt())
        try:
            await self._until_held(name)
            await self._place(copy, next)  # held here: runs here (no await since the take)
            copy.receipt.sink_returned()
            done = await copy.receipt.wait()
            if copy.receipt.handed_over:
                event.receipt.hand_over()
            outcome.set_result(done)
        finally:
            if not outcome.done():
                outcome.set_result(False)  # cut short (a shutdown): a later delivery runs it

    async def on_mail(self, mail: Mail, enter: EventSink) -> None:
        """A mail of kind ``event`` to this process: the event enters this process's whole
        inbound fold (``enter``), as if received here.

        Returns at once: the mailbox hands this process's mail over one at a time, and
        its handling may wait for a relayed call's ``result`` mail, which comes behind this
        one. The events of one session are placed in the order they came."""
        try:
            event = decode_event(mail.payload)
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning(
                "cluster: event mail %d from %s unreadable: %s", mail.id, mail.sender, exc
            )
            return
        self.stats.received += 1
        name = session_lease(self._key_of(event))
        placing = self._place_after(self._mailed.get(name), event, enter)
        task = self._settling.spawn(placing, name=f"cluster-mail-{mail.id}")
        self._mailed[name] = task
        task.add_done_callback(partial(self._mailed_done, name))

    async def _place_after(
        self, previous: asyncio.Task[None] | None, event: InboundEvent, enter: EventSink
    ) -> None:
        if previous is not None:
            await asyncio.wait({previous})
        with fenced(None):  # placed as this process's own decision, not a bot's owner's
            await enter(event)

    def _mailed_done(self, name: str, task: asyncio.Task[None]) -> None:
        if self._mailed.get(name) is task:
            del self._mailed[name]

    # what this process holds --------------------------------------------------------------
    @property
    def in_flight(self) -> frozenset[ItemKey]:
        """Items whose handling runs here now."""
        return frozenset(self._in_flight)

    def held(self) -> list[Fence]:
        """The session fences this process holds (local view)."""
        return [f for f in self._leases.held() if f.lease.startswith(SESSION_PREFIX)]

    async def fenced_out(self) -> bool:
        """Whether the work running in this context is a session's whose lease this process
        no longer holds (logged once per fence); its results must not be sent. Asks the
        server: a process paused past its lease still holds it in its own view."""
        fence = current_fence()
        if fence is None or not fence.lease.startswith(SESSION_PREFIX):
            return False
        if self._leases.fence_of(fence.lease) == fence:
            try:
                holder = await self._leases.holder(fence.lease)
            except _UNCHECKED as exc:  # unknown: the reply still goes
                logger.warning("cluster: lease %s not checked (%s)", fence.lease, exc)
                return False
            held = Fence(holder.name, holder.owner, holder.epoch) if holder else None
            if holder is not None and holder.live and held == fence:
                return False
        self.lost(fence)
        return True

    def lost(self, fence: Fence) -> None:
        """``fence`` is no longer this process's: say so once."""
        if fence in self._warned:
            return
        self._warned.add(fence)
        self.stats.lost += 1
        key = fence.lease.removeprefix(SESSION_PREFIX)
        logger.warning("lost the lease of session %s; another process runs it now", key)

    def take_released(self) -> set[Fence]:
        """The fences released here since the last call (a renewal that raced a release
        does not count them as lost)."""
        released, self._released = self._released, set()
        return released

    async def release_idle(self) -> int:
        """Release every session lease held here with nothing running or in flight for it
        (a turn queued by a steer's leftovers that ended since); how many."""
        released = 0
        for fence in self.held():
            name, key = fence.lease, fence.lease.removeprefix(SESSION_PREFIX)
            if name in self._sessions or self._busy(key):
                continue
            slot = self._enter(name)
            try:
                async with slot.lock:  # an event being placed meanwhile waits for this
                    idle = slot.running <= 0 and not self._busy(key)
                    if idle and self._leases.fence_of(name) == fence:
                        await self._release(fence)
                        released += 1
            finally:
                self._leave(name)
        return released

    async def drain(self) -> None:
        """Until every event placed so far (and any placed meanwhile) has settled."""
        await self._settling.drain()

    async def aclose(self) -> None:
        """Stop waiting for the outcomes of events in flight (they stay unfinished)."""
        await self._settling.aclose()

    # placing one event --------------------------------------------------------------------
    async def _place(self, event: InboundEvent, next: Next) -> None:
        name = session_lease(self._key_of(event))
        slot = self._enter(name)
        try:
            async with slot.lock:
                where = await self._where(name)
                if isinstance(where, Fence):
                    slot.running += 1
        except Exception as exc:
            self._leave(name)
            logger.warning(
                "cluster: %s:%s not placed (%s); a later delivery runs it",
                event.platform, event.update_id, exc,
            )  # fmt: skip
            event.receipt.settle(False)
            return
        if isinstance(where, Fence):
            await self._run(event, where, name, next)
            return
        self._leave(name)
        await self._forward(event, where)

    async def _where(self, name: str) -> Fence | str:
        """This process's fence for the session, or the process to forward to."""
        fence = self._leases.fence_of(name)
        if fence is not None and self._leases.valid(fence):
            return fence
        for _ in range(PLACEMENT_TRIES):
            holder = await self._leases.holder(name)
            if holder is not None and holder.live and holder.owner != self.process_id:
                return holder.owner
            if holder is None or not holder.live:
                target = await self._members.least_busy()
                if target != self.process_id:
                    after = await self._leases.claim(name, target)
                    if after.owner != self.process_id:
                        return after.owner
            fence = await self._acquire(name)
            if fence is not None:
                return fence
        raise StoreError(f"the lease {name} kept changing hands")

    async def _acquire(self, name: str) -> Fence | None:
        """The session lease taken here, when free or expired (None: another holds it)."""
        fence = await self._leases.acquire(name)
        if fence is not None and self._taken is not None:
            self._taken(name.removeprefix(SESSION_PREFIX))
        return fence

    async def _forward(self, event: InboundEvent, owner: str) -> None:
        try:
            await self._mailbox.send(owner, EVENT, encode_event(event))
        except Fenced as exc:
            logger.warning("cluster: %s:%s not forwarded: %s", event.platform, event.update_id, exc)
            event.receipt.settle(False)
            return
        except Exception as exc:
            logger.warning(
                "cluster: %s:%s not forwarded to %s (%s); a later delivery runs it",
                event.platform, event.update_id, owner, exc,
            )  # fmt: skip
            event.receipt.settle(False)
            return
        self.stats.forwarded += 1
        logger.debug("cluster: %s:%s forwarded to %s", event.platform, event.update_id, owner)
        event.receipt.hand_over()

    async def _run(self, event: InboundEvent, fence: Fence, name: str, next: Next) -> None:
        item = (event.platform, event.update_id)
        if item in self._in_flight or await self._done(item):
            self.stats.dropped += 1
            if item in self._in_flight:
                event.receipt.hand_over()  # the delivery in flight here marks it
            else:
                event.receipt.settle(True)
            await self._ended(name)
            return
        self._in_flight.add(item)
        outcome: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        event.receipt.follow(outcome)  # settled by _settle, not as the sink returns
        copy = replace(event, receipt=Receipt())
        label = f"cluster-event-{event.platform}-{event.update_id}"
        self._settling.spawn(self._settle(event, outcome, copy, fence, name), name=label)
        try:
            if event.kind == "text" and self._delivered is not None:
                await self._delivered(self._key_of(event))
            with fenced(fence):
                await next(copy)
        except Exception:  # the rest of the fold failed: logged, handled as the router did
            logger.exception("event %s:%s could not be handled", event.platform, event.update_id)
        except BaseException:
            copy.receipt.settle(False)  # cancelled (a shutdown): a later delivery runs it
            raise
        copy.receipt.sink_returned()

    async def _done(self, item: ItemKey) -> bool:
        try:
            record = await self._store.get_inbound(*item)
        except StoreError:
            return False
        return record is not None and record.state == "done"

    async def _settle(
        self,
        event: InboundEvent,
        outcome: asyncio.Future[bool],
        copy: InboundEvent,
        fence: Fence,
        name: str,
    ) -> None:
        """The event's own receipt once the copy's is known (module docstring)."""
        item = (event.platform, event.update_id)
        try:
            ok = await copy.receipt.wait()
            if ok and not await self._mark_done(item, fence):
                event.receipt.hand_over()
            outcome.set_result(ok)
        finally:
            self._in_flight.discard(item)
            if not outcome.done():  # cancelled: unfinished, a later delivery runs it
                outcome.set_result(False)
            await self._ended(name)

    async def _mark_done(self, item: ItemKey, fence: Fence) -> bool:
        """Mark the item done under the session fence; False when the fence was refused."""
        try:
            with fenced(fence):
                await self._store.set_inbound_state(*item, "done")
        except Fenced:
            self.lost(fence)
            return False
        except StoreError as exc:
            logger.warning("cluster: %s:%s not marked done (%s)", *item, exc)
        return True

    # sessions -------------------------------------------------------------------------------
    def _enter(self, name: str) -> _Session:
        slot = self._sessions.get(name)
        if slot is None:
            slot = self._sessions[name] = _Session(asyncio.Lock())
        slot.users += 1
        return slot

    def _leave(self, name: str) -> None:
        slot = self._sessions.get(name)
        if slot is None:
            return
        slot.users -= 1
        if slot.users <= 0:
            del self._sessions[name]

    async def _ended(self, name: str) -> None:
        """One event placed here has ended: release the lease when the session is idle."""
        slot = self._sessions.get(name)
        if slot is None:
            return
        try:
            async with slot.lock:
                slot.running -= 1
                fence = self._leases.fence_of(name)
                idle = slot.running <= 0 and not self._busy(name.removeprefix(SESSION_PREFIX))
                if idle and fence is not None:
                    await self._release(fence)
        finally:
            self._leave(name)

    async def _release(self, fence: Fence) -> None:
        self._released.add(fence)
        try:
            await self._leases.release(fence)
        except Exception as exc:  # it expires by itself within the ttl
            logger.warning("cluster: lease %s not released (%s)", fence.lease, exc)


def _own_key(event: InboundEvent) -> str:
    return str(event.session_key)
