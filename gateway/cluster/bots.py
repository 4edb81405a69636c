"""A leased bot's adapter in this process: started only while this process holds the lease.

The cluster node (:mod:`gateway.cluster.node`) keeps one :class:`LeasedBot` per bot whose
platform registration names a ``lease_credential`` (:class:`adapters.platforms.Platform`).
It is what the service attaches for that platform — its lifecycle and health — while the
bot's calls are routed by the fold's :class:`~gateway.cluster.relay_stage.RelayStage`
(:attr:`LeasedBot.stage`): nothing here relays, schedules or redacts a call::

    start(sink)     remembered; nothing connects (the lease decides who does)
    take(fence)     lease won: the real adapter starts, under fenced(fence), with the sink
    give_up()       lease lost: the real adapter stops; a fresh one is built for the next
                    take (an adapter does not start again after stop)
    perform(call)   the end of the fold on the owner: the running real adapter

Health while another process owns the bot is ``up``, reason ``relayed to the bot's owner``:
the bot reaches the agent through that process, so this one is not down (the gateway
refuses to start when every way in is down: gateway/app.py ``_check_ways_in``).

``download`` is the real adapter's whether it runs or not: a turn here may need a file
the owner received (the Telegram adapter opens its HTTP client on first use for that).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable

from adapters.base import Adapter, AdapterError, Capabilities, EventSink, SentMessage
from adapters.calls import Call
from adapters.health import Health
from core.attachments import Attachment
from core.store.fencing import Fence, fenced
from gateway.cluster.relay_stage import RelayStage

logger = logging.getLogger(__name__)

RELAYED = "relayed to the bot's owner"
"""The health reason of a bot another process owns."""


def _always() -> bool:
    return True


class LeasedBot:
    """One leased bot's adapter lifecycle (module docstring)."""

    def __init__(self, build: Callable[[], Adapter], stage: RelayStage) -> None:
        """``build`` makes a new real adapter (at once, for the capabilities, and after
        each :meth:`give_up`); ``stage`` is the bot's relay stage in the outbound fold."""
        self.stage = stage
        self.bot = stage.bot
        self._build = build
        self.real: Adapter = build()
        self.platform: str = self.real.platform
        self.capabilities: Capabilities = self.real.capabilities
        self._sink: EventSink | None = None
        self._used_unowned = False
        self._stopped = False
        self._since = time.time()
        self._changing = asyncio.Lock()

    @property
    def owned(self) -> bool:
        return self.stage.owned

    @property
    def fence(self) -> Fence | None:
        return self.stage.fence

    @property
    def health(self) -> Health:
        if self.owned or self._sink is None:
            return self.real.health
        if self._stopped:
            return Health("stopped", self._since)
        return Health("up", self._since, RELAYED)

    @property
    def durable_inbox(self) -> object:
        """The running real adapter's durable inbox (None while not owned): the sweeper's."""
        return getattr(self.real, "durable_inbox", None) if self.owned else None

    async def start(self, sink: EventSink) -> None:
        """Remember ``sink`` for the real adapter; connect only once the lease is taken."""
        self._sink = sink
        self._since = time.time()

    async def take(self, fence: Fence, valid: Callable[[], bool] = _always) -> None:
        """The bot's lease is ours: start the real adapter under ``fence`` (its tasks
        inherit it), delivering to the sink given to :meth:`start`; ``valid`` says whether
        the lease is still ours locally (checked by the stage before every call). A start
        that raises leaves the bot not owned (a fresh adapter built) and raises."""
        async with self._changing:
            if self._sink is None or self._stopped:
                raise AdapterError(f"{self.bot}: taken before start or after stop")
            if self.owned:
                self.stage.owning(fence, valid)  # already running: a new epoch
                return
            running = self.stage.owning(fence, valid)
            try:
                with fenced(fence):
                    await self.real.start(self._sink)
            except BaseException:
                await self.stage.lost()
                await self._replace()
                raise
            finally:
                running.set()
            logger.info("%s: this process owns %s now", self.platform, self.bot)

    async def give_up(self) -> None:
        """The lease is lost: calls go to the owner from now on; the real adapter stops
        (receiving ends) and a fresh one is built."""
        async with self._changing:
            if not self.owned:
                return
            await self.stage.lost()
            await self._replace()
            self._since = time.time()
            logger.info("%s: gave up %s; its calls go to its owner", self.platform, self.bot)

    async def stop(self) -> None:
        """Stop the real adapter if it runs (or served downloads while not owned)."""
        async with self._changing:
            self._stopped = True
            self._since = time.time()
            running = self.owned or self._used_unowned
            if self.owned:
                await self.stage.lost()
            await self.stage.aclose()
            if running:
                await self.real.stop()

    async def _replace(self) -> None:
        old, self.real = self.real, self._build()
        self._used_unowned = False
        try:
            await old.stop()
        except Exception:
            logger.exception("%s: stopping the adapter of %s failed", self.platform, self.bot)

    async def perform(self, call: Call) -> SentMessage | None:
        """The end of the owner's fold (the relay stage let the call through); never the
        platform while another process owns the bot."""
        if not self.owned:
            raise AdapterError(f"{self.bot} is not this process's: its calls go by its fold")
        return await self.real.perform(call)

    def download(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """The real adapter's download, running or not (module docstring)."""
        if not self.owned:
            self._used_unowned = True  # its HTTP client opens: stop() closes it
        return self.real.download(attachment)
