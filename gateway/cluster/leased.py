"""One leased bot in one process: the real adapter while this process owns the bot's lease,
its calls relayed to the owner while it does not (docs/cluster.md).

A bot (a Telegram, Discord or Slack credential) is owned by exactly one process of a
cluster, through the lease ``bot:<platform>:<12 hex of sha256(credential)>``
(:func:`bot_lease_name`): that process alone polls or holds the socket, and makes the
bot's platform calls, so the platform's budget is exact. Every process still attaches the
bot like any other (its chats, its pipeline, its capabilities) through a
:class:`LeasedAdapter`, which the cluster node drives::

    start(sink)     remembered; nothing connects (the lease decides who does)
    take(fence)     lease won: the real adapter starts, under fenced(fence), with the sink
    give_up()       lease lost: the real adapter stops; a fresh one is built for the next
                    take (an adapter does not start again after stop)
    renewed()       the node renewed the lease: calls held back by a stale local view go
    perform(call)   owned: the real adapter — but while the lease is no longer locally
                    valid (a paused owner must not reach the platform) the call waits for
                    the node's next renewal (made then) or loss (relayed to the new
                    owner), at most ``renewal_wait`` seconds, then is refused; not owned:
                    the call goes by mail to the owner (gateway.cluster.relay)

Health while another process owns the bot is ``up``, reason ``relayed to the bot's owner``:
the bot reaches the agent through that process, so this one is not down (the gateway
refuses to start when every way in is down: gateway/app.py ``_check_ways_in``).

``download`` is the real adapter's whether it runs or not: a turn here may need a file
the owner received. The Telegram adapter opens its HTTP client on first use for that.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from adapters.base import Adapter, AdapterError, Capabilities, EventSink, SentMessage
from adapters.calls import Call
from adapters.health import Health
from core.attachments import Attachment
from core.store.fencing import Fence, fenced
from gateway.cluster.relay import Relay

logger = logging.getLogger(__name__)

RENEWAL_WAIT = 10.0
"""Default seconds a call waits for a stale lease to be renewed or lost."""
RELAYED = "relayed to the bot's owner"
"""The health reason of a bot another process owns."""


def bot_lease_name(platform: str, credential: str) -> str:
    """``bot:<platform>:<12 hex of sha256(credential)>``: the credential never appears."""
    digest = hashlib.sha256(credential.encode()).hexdigest()[:12]
    return f"bot:{platform}:{digest}"


def _always() -> bool:
    return True


class LeasedAdapter:
    """An :class:`adapters.base.Adapter` standing for one leased bot (module docstring)."""

    def __init__(
        self,
        build: Callable[[], Adapter],
        bot: str,
        relay: Relay,
        *,
        renewal_wait: float = RENEWAL_WAIT,
    ) -> None:
        """``build`` makes a new real adapter (at once, for the capabilities, and after
        each :meth:`give_up`); ``bot`` is the bot's lease name; ``renewal_wait`` bounds how
        long a call waits for a stale lease to be renewed or lost (the lease's length)."""
        self.bot = bot
        self._renewal_wait = renewal_wait
        self._lease_news = asyncio.Condition()
        self._build = build
        self._relay = relay
        self.real: Adapter = build()
        self.platform: str = self.real.platform
        self.capabilities: Capabilities = self.real.capabilities
        self._sink: EventSink | None = None
        self._fence: Fence | None = None
        self._valid: Callable[[], bool] = _always
        self._running = asyncio.Event()
        """Set once the real adapter of the current take has started (or failed to)."""
        self._used_unowned = False
        self._stopped = False
        self._since = time.time()
        self._changing = asyncio.Lock()

    @property
    def owned(self) -> bool:
        return self._fence is not None

    @property
    def fence(self) -> Fence | None:
        """The bot lease this process holds (None: another process owns the bot)."""
        return self._fence

    @property
    def health(self) -> Health:
        if self._fence is not None or self._sink is None:
            return self.real.health
        if self._stopped:
            return Health("stopped", self._since)
        return Health("up", self._since, RELAYED)

    @property
    def durable_inbox(self) -> Any:
        """The running real adapter's durable inbox (None while not owned): the sweeper's."""
        return getattr(self.real, "durable_inbox", None) if self._fence is not None else None

    # lifecycle ----------------------------------------------------------------------------
    async def start(self, sink: EventSink) -> None:
        """Remember ``sink`` for the real adapter; connect only once the lease is taken."""
        self._sink = sink
        self._since = time.time()

    async def take(self, fence: Fence, valid: Callable[[], bool] = _always) -> None:
        """The bot's lease is ours: start the real adapter under ``fence`` (its tasks
        inherit it), delivering to the sink given to :meth:`start`. ``valid`` says whether
        the lease is still ours locally (``Leases.valid``), checked before every call.
        A start that raises leaves the bot not owned (a fresh adapter built) and raises."""
        async with self._changing:
            if self._sink is None or self._stopped:
                raise AdapterError(f"{self.bot}: taken before start or after stop")
            if self._fence is not None:
                self._fence, self._valid = fence, valid  # already running: a new epoch
                return
            self._fence, self._valid = fence, valid
            self._running = running = asyncio.Event()
            try:
                with fenced(fence):
                    await self.real.start(self._sink)
            except BaseException:
                self._fence = None
                await self._replace()
                raise
            finally:
                running.set()
            logger.info("%s: this process owns %s now", self.platform, self.bot)

    async def give_up(self) -> None:
        """The lease is lost: stop the real adapter (receiving ends) and build a fresh one;
        calls from now on are relayed."""
        async with self._changing:
            if self._fence is None:
                return
            self._fence, self._valid = None, _always
            await self._tell_waiters()
            await self._replace()
            self._since = time.time()
            logger.info("%s: gave up %s; its calls go to its owner", self.platform, self.bot)

    async def stop(self) -> None:
        """Stop the real adapter if it runs (or served downloads while not owned)."""
        async with self._changing:
            self._stopped = True
            self._since = time.time()
            if self._fence is not None or self._used_unowned:
                self._fence = None
                await self.real.stop()

    async def _replace(self) -> None:
        old, self.real = self.real, self._build()
        self._used_unowned = False
        try:
            await old.stop()
        except Exception:
            logger.exception("%s: stopping the adapter of %s failed", self.platform, self.bot)

    # calls --------------------------------------------------------------------------------
    async def perform(self, call: Call) -> SentMessage | None:
        """Owned: the real adapter makes ``call`` (AdapterError once the lease is no
        longer locally valid); not owned: the bot's owner does, by mail. A call made while
        the real adapter is starting waits for it to be up (the start never waits for a
        call: events reach the sink from the adapter's own tasks)."""
        if self._fence is not None and not self._running.is_set():
            await self._running.wait()
        if self._fence is not None and not self._valid():
            await self._await_lease_news()
        if self._fence is not None:
            return await self.real.perform(call)
        return await self._relay.perform(self.bot, call)

    async def renewed(self) -> None:
        """The node renewed this bot's lease: calls waiting on a stale view go on."""
        await self._tell_waiters()

    async def _await_lease_news(self) -> None:
        """Until the lease is locally valid again or lost; AdapterError after
        ``renewal_wait`` seconds of neither (the database out of reach)."""
        async with self._lease_news:
            try:
                await asyncio.wait_for(
                    self._lease_news.wait_for(lambda: self._fence is None or self._valid()),
                    self._renewal_wait,
                )
            except TimeoutError:
                raise AdapterError(f"lost the lease of {self.bot}") from None

    async def _tell_waiters(self) -> None:
        async with self._lease_news:
            self._lease_news.notify_all()

    def download(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """The real adapter's download, running or not (module docstring)."""
        if self._fence is None:
            self._used_unowned = True  # its HTTP client opens: stop() closes it
        return self.real.download(attachment)
