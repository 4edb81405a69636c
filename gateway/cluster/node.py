"""One process's part in a cluster: its bots, its sessions, its mail, its heartbeat.

With ``[store] url = "postgresql://..."`` every ``commonos run`` process builds one
:class:`ClusterNode` (docs/cluster.md); with SQLite there is none and nothing here runs.
The node

* leases each bot whose platform registration names a ``lease_credential``
  (:class:`adapters.platforms.Platform`; :meth:`ClusterNode.lease_bots`): its adapter is a
  :class:`~gateway.cluster.bots.LeasedBot`, started only while this process holds the lease,
  and its outbound fold has the bot's :class:`~gateway.cluster.relay_stage.RelayStage`
  (owned → the adapter, else mail to the owner, whose node serves the call through its own
  fold); the other adapters (the web chat, the terminal) are per process and stay as they are;
* holds the inbound stage ``cluster_claim`` (:attr:`ClusterNode.claim`, a
  :class:`~gateway.cluster.sink.ClusterClaim`: claim-or-forward), which the service puts
  second in its inbound fold;
* at :meth:`start`: joins (``processes``), serves its mail (its process id: ``event`` →
  the service's inbound fold, ``result`` → the relay, ``control`` → the dashboard's actions:
  :mod:`gateway.cluster.control`), tries to take every bot at once, then beats every
  ``lease_seconds / 3``;
* each tick (:meth:`tick`): beats, renews every lease it holds in one statement — a bot
  it lost is given up (its adapter stopped: another process polls it now), a session it
  lost has its local turn stopped without a notice —, tries to take every bot it does not
  own (a free or expired lease: a takeover, logged; the calls relayed to the old owner that
  it took and never answered are made again here), takes the mail NOTIFY may have missed,
  reads the identity links again (one made on another process keys a linked person's
  messages here too: a linked session is leased under its ``link:dm:`` key), redelivers
  what nobody runs (:mod:`gateway.cluster.sweeper`) and releases the sessions that went
  idle. A tick that outlasts the leases' local validity (the database out of
  reach) is cut off, and a bot not renewed in time stops receiving;
* at :meth:`stop` (after the service stopped its turns and adapters): gives up its bots,
  closes the relay and the mailbox and leaves, which ends every lease it holds at once,
  so the others take over at their next tick rather than after the ttl.

Log lines another process (or a test) can read: ``cluster: joined as <id>``,
``cluster: owns bot <lease> (epoch N)``, ``cluster: took over bot <lease> from <id>``,
``cluster: lost bot <lease> (epoch N)`` (or ``(not renewed in time)``),
``cluster: <lease>: N call(s) the old owner never answered made again``,
``lost the lease of session <key>; another process runs it now``, ``cluster: left``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from adapters.base import Adapter, InboundEvent
from adapters.inbox import DurableInbox
from adapters.platforms import platforms
from core.store.base import ApprovalRecord
from core.store.fencing import Fence, fenced
from core.tasks import TaskSet
from gateway.cluster.bots import LeasedBot
from gateway.cluster.control import CONTROL, ClusterControl
from gateway.cluster.leases import SESSION_PREFIX, Leases
from gateway.cluster.mailbox import Mail, Mailbox
from gateway.cluster.members import Members
from gateway.cluster.relay import RESULT, Relay
from gateway.cluster.relay_stage import RelayStage, bot_lease_name
from gateway.cluster.sink import EVENT, ClusterClaim
from gateway.cluster.stats import ClusterStats
from gateway.cluster.sweeper import Sweeper
from gateway.config.sections import ClusterSection

if TYPE_CHECKING:
    from core.store.postgres import PgStore
    from gateway.service import GatewayService

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
Build = Callable[[], Adapter]

DELIVERY_WAIT = 5.0
"""Longest a text message waits for its session's last reply to be delivered."""
MAIL_SWEEP_TICKS = 120
"""Every this many ticks, mail taken or left for an hour is deleted."""
_RETAKE = """UPDATE cluster_mail AS c SET taken_at = NULL
    WHERE c.target = $1 AND c.kind = 'call' AND c.taken_at IS NOT NULL
      AND c.created_at > clock_timestamp() - make_interval(secs => $2)
      AND NOT EXISTS (SELECT 1 FROM cluster_mail AS r
          WHERE r.kind = 'result' AND r.target = c.sender
            AND r.payload::json ->> 'id' = c.payload::json ->> 'id')"""
"""A taken-over bot's calls its old owner took and never answered, untaken again."""


class ClusterNode:
    """This process in the cluster (module docstring)."""

    def __init__(
        self,
        store: PgStore,
        section: ClusterSection,
        *,
        web_url: str | None,
        process_id: str,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``sleep`` waits between ticks and ``clock`` is the leases' local clock (tests
        pass their own)."""
        self.store = store
        self.process_id = process_id
        self.ttl = float(section.lease_seconds)
        self.tick_seconds = self.ttl / 3
        name = section.name or process_id.rsplit("/", 1)[0]
        self.leases = Leases(store.pool, process_id, self.ttl, clock)
        self.members = Members(store.pool, process_id, name, self.ttl)
        self.mailbox = Mailbox(store.pool, store.dsn, process_id)
        self.relay = Relay(self.mailbox, process_id)
        self.control = ClusterControl(store, self.leases, self.mailbox, process_id)
        """The dashboard's actions across processes (mail kind ``control``)."""
        self.web_url = web_url
        self.bots: dict[str, LeasedBot] = {}
        """Leased bots by lease name."""
        self._sleep, self._clock = sleep, clock
        self._service: GatewayService | None = None
        self.claim = ClusterClaim(
            store=store, leases=self.leases, members=self.members, mailbox=self.mailbox,
            process_id=process_id, leased_platforms=self._leased_platforms, busy=self._busy,
            delivered=self._delivered, key_of=self._key_of, taken=self._taken,
        )  # fmt: skip
        """The inbound stage ``cluster_claim`` (claim-or-forward)."""
        self.sweeper = Sweeper(store, self.leases, self._in_flight, age=self.tick_seconds)
        self._loop = TaskSet(logger)
        self._ticks = 0
        self._last_renewal: float | None = None
        self._renewals = self._lost = self._takeovers = 0
        self._live = 0
        self._failing = False

    # composition ----------------------------------------------------------------------------
    def lease_bots(
        self, adapters: Sequence[Adapter], builders: Mapping[str, Build] | None = None
    ) -> list[tuple[Adapter, RelayStage | None]]:
        """Each adapter to attach, with its bot's relay stage: a platform whose registration
        names a ``lease_credential`` gets a :class:`LeasedBot` and a :class:`RelayStage` (its
        fresh adapters, after a lease is lost, come from ``builders[platform]``); the others
        are returned as they are, with no stage."""
        registered = platforms()
        attached: list[tuple[Adapter, RelayStage | None]] = []
        for adapter in adapters:
            platform = registered.get(adapter.platform)
            credential = platform.lease_credential if platform is not None else None
            secret = credential(adapter) if credential is not None else ""
            if not secret:
                attached.append((adapter, None))
                continue
            stage = RelayStage(
                bot_lease_name(adapter.platform, secret), self.relay, renewal_wait=self.ttl
            )
            build = _first_then(adapter, (builders or {}).get(adapter.platform))
            bot = self.bots[stage.bot] = LeasedBot(build, stage)
            attached.append((bot, stage))
        return attached

    async def fenced_out(self) -> bool:
        """The session of the work running in this context is no longer this process's."""
        return await self.claim.fenced_out()

    # lifecycle ------------------------------------------------------------------------------
    async def start(self, service: GatewayService) -> None:
        """Join, serve this process's mail, take every free bot, start the heartbeat."""
        self._service = service
        self.control.attach(service)
        self.leases.on_cancelled = self._retire_cards
        self.web_url = self.web_url or _web_url(service)
        with fenced(None):
            await self.members.join(self.web_url)
            logger.info("cluster: joined as %s (lease %gs)", self.process_id, self.ttl)
            self.mailbox.serve(self.process_id, self._receive)
            await self.mailbox.start()
            await self._renew()
            await self._take_bots()
        self._loop.spawn(self._heartbeat(), name="cluster-heartbeat")

    def _retire_cards(self, records: list[ApprovalRecord]) -> None:
        """The cards of approvals a session takeover cancelled are edited as at a restart
        (``RESTART_NOTICE``, no buttons), in the background."""
        if self._service is None:
            return
        for record in records:
            self._loop.spawn(self._service.approver.retire(record), name=f"retire-{record.id}")

    async def stop(self) -> None:
        """Give up the bots, release the sessions, leave: the others take over at once."""
        await self._loop.aclose()
        with fenced(None):
            for name, bot in self.bots.items():
                self.mailbox.unserve(name)
                await _quietly(f"giving up {name}", bot.give_up())
            await self.claim.aclose()
            await _quietly("closing the relay", self.relay.aclose())
            await _quietly("closing the mailbox", self.mailbox.aclose())
            await _quietly("leaving", self.members.leave())
        logger.info("cluster: left (%s)", self.process_id)

    async def _heartbeat(self) -> None:
        while True:
            await self._sleep(self.tick_seconds)
            await self.tick()

    async def tick(self) -> None:
        """One heartbeat (module docstring), cut off when it would outlast the leases'
        local validity; a failure is logged once per outage. Then a bot whose lease could
        not be renewed in time (the database out of reach, this process paused) stops
        receiving, before the server lets another process take it."""
        with fenced(None):
            try:
                await asyncio.wait_for(self._tick(), self.ttl - self.leases.margin)
            except Exception as exc:
                if not self._failing:
                    why = str(exc) or type(exc).__name__
                    logger.warning("cluster: heartbeat failed (%s); retrying each tick", why)
                self._failing = True
                await self._stop_stale_bots()
                return
        if self._failing:
            logger.warning("cluster: heartbeat works again")
        self._failing = False

    async def _stop_stale_bots(self) -> None:
        for name, bot in self.bots.items():
            fence = bot.fence
            if fence is not None and not self.leases.valid(fence):
                logger.warning("cluster: lost bot %s (not renewed in time)", name)
                self.mailbox.unserve(name)
                await _quietly(f"giving up {name}", bot.give_up())

    async def _tick(self) -> None:
        self._ticks += 1
        await self.members.beat()
        await self._renew()
        await self._take_bots()
        await self.mailbox.take()
        if self._service is not None:  # links made on other processes (gateway/control/links.py)
            await self._service.links.load()
        await self.sweeper.sweep(self._owned_inboxes())
        await self.claim.release_idle()
        self._live = len(await self.members.live())
        if self._ticks % MAIL_SWEEP_TICKS == 0:
            await self.mailbox.sweep()

    # leases ---------------------------------------------------------------------------------
    async def _renew(self) -> None:
        held = self.leases.held()
        if not held:
            self._last_renewal = self._clock()
            return
        kept = await self.leases.renew(held)
        self._renewals += 1
        self._last_renewal = self._clock()
        released = self.claim.take_released()
        for fence in held:
            if fence.lease not in kept and fence not in released:
                self._lost += 1
                await self._lost_lease(fence)
            elif (bot := self.bots.get(fence.lease)) is not None:
                await bot.stage.renewed()

    async def _lost_lease(self, fence: Fence) -> None:
        bot = self.bots.get(fence.lease)
        if bot is not None:
            logger.warning("cluster: lost bot %s (epoch %d)", fence.lease, fence.epoch)
            self.mailbox.unserve(fence.lease)
            await bot.give_up()
            return
        if fence.lease.startswith(SESSION_PREFIX):
            self.claim.lost(fence)
            if self._service is not None:
                self._service.dispatcher.stop(fence.lease.removeprefix(SESSION_PREFIX))

    async def _take_bots(self) -> None:
        for name, bot in self.bots.items():
            if bot.owned:
                continue
            holder = await self.leases.holder(name)
            if holder is not None and holder.live and holder.owner != self.process_id:
                continue
            fence = await self.leases.acquire(name)
            if fence is None:
                continue
            if holder is not None and holder.owner != self.process_id:
                self._takeovers += 1
                logger.warning("cluster: took over bot %s from %s", name, holder.owner)
            await self._retake_calls(name)  # also this process's own, after it lapsed
            await self._take(bot, fence)

    async def _retake_calls(self, bot: str) -> None:
        """Calls relayed to the old owner that it took but never answered (it died with
        them, or a database outage cut its take off after the store had marked them
        taken) are made again by this process: their askers still wait (a call the old
        owner made just before it died may show twice, as far as the platform allows; one
        this process is still making is made once, :class:`Relay` knows its id)."""
        status = await self.store.pool.execute(_RETAKE, bot, self.relay.timeout)
        count = int(status.rsplit(" ", 1)[-1]) if status.startswith("UPDATE") else 0
        if count:
            what = "call(s) the old owner never answered made again"
            logger.warning("cluster: %s: %d %s", bot, count, what)

    async def _take(self, bot: LeasedBot, fence: Fence) -> None:
        leases = self.leases
        try:
            await bot.take(fence, lambda: leases.valid(fence))
        except Exception as exc:
            logger.error("cluster: bot %s did not start (%s); released", fence.lease, exc)
            await leases.release(fence)
            return
        logger.info("cluster: owns bot %s (epoch %d)", fence.lease, fence.epoch)
        outbound = self._service.directory.outbound(bot.platform) if self._service else None
        if outbound is not None:
            self.mailbox.serve(fence.lease, self.relay.executor(outbound.perform))

    # mail -----------------------------------------------------------------------------------
    async def _receive(self, mail: Mail) -> None:
        inbound = self._service.inbound if self._service is not None else None
        if mail.kind == EVENT and inbound is not None:
            await self.claim.on_mail(mail, inbound.enter)
        elif mail.kind == RESULT:
            await self.relay.on_result(mail)
        elif mail.kind == CONTROL:
            await self.control.on_mail(mail)
        else:
            logger.warning(
                "cluster: mail %d of kind %r from %s ignored", mail.id, mail.kind, mail.sender
            )

    # views ----------------------------------------------------------------------------------
    def _leased_platforms(self) -> frozenset[str]:
        return frozenset(bot.platform for bot in self.bots.values())

    def _key_of(self, event: InboundEvent) -> str:
        """The session key the event's turn runs under: a linked identity's direct message
        runs in its person's session (gateway/control/links.py), leased as one."""
        if self._service is None:
            return str(event.session_key)
        return str(self._service.links.rekey(event).session_key)

    def _taken(self, session_key: str) -> None:
        """A session now run here may have changed settings on another process."""
        if self._service is not None:
            self._service.settings.forget(session_key)

    def _busy(self, session_key: str) -> bool:
        service = self._service
        return service is not None and session_key in service.dispatcher.busy_keys

    async def _delivered(self, session_key: str) -> None:
        """Once the session's lane, when all it does is deliver its last reply, is over
        (at most :data:`DELIVERY_WAIT` seconds)."""
        service = self._service
        if service is None or session_key not in service.dispatcher.busy_keys:
            return
        status = service.dispatcher.status(session_key)
        if status.running or status.queue_length or status.gathering:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(service.dispatcher.wait_idle(session_key), DELIVERY_WAIT)

    def _in_flight(self) -> frozenset[tuple[str, str]]:
        return self.claim.in_flight

    def _owned_inboxes(self) -> list[DurableInbox[Any]]:
        inboxes = [bot.durable_inbox for bot in self.bots.values() if bot.owned]
        return [inbox for inbox in inboxes if isinstance(inbox, DurableInbox)]

    def stats(self) -> ClusterStats:
        """What this process reports of its part (``/metrics``, logs)."""
        sink = self.claim.stats
        age = self._clock() - self._last_renewal if self._last_renewal is not None else 0.0
        return ClusterStats(
            process_id=self.process_id,
            live_processes=self._live,
            bots_owned=tuple(sorted(name for name, bot in self.bots.items() if bot.owned)),
            sessions_held=len(self.claim.held()),
            lease_renewals=self._renewals,
            leases_lost=self._lost,
            takeovers=self._takeovers,
            events_forwarded=sink.forwarded,
            events_received=sink.received,
            calls_relayed=self.relay.stats.relayed,
            calls_served=self.relay.stats.served,
            mail_reconnects=self.mailbox.stats.reconnects,
            last_renewal_age=age,
        )


def _web_url(service: GatewayService) -> str | None:
    """The address of the first route host this process serves (the web chat's; shown by
    ``commonos status``), from its platform's registration."""
    for name, platform in platforms().items():
        adapter = service.directory.adapter(name)
        if platform.route_host is None or adapter is None:
            continue
        address = platform.route_host(adapter).address
        url = address() if address is not None else None
        if url:
            return url
    return None


def _first_then(first: Adapter, build: Build | None) -> Build:
    """``first`` at the first call, then what ``build`` makes (``first`` again without it:
    an adapter that cannot be rebuilt is restarted as it is)."""
    made = [first]

    def next_adapter() -> Adapter:
        if made:
            return made.pop()
        return build() if build is not None else first

    return next_adapter


async def _quietly(what: str, closing: Awaitable[None]) -> None:
    try:
        await closing
    except Exception:
        logger.exception("cluster: %s failed", what)
