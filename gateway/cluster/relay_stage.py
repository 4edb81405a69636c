"""The cluster's outbound stage of one leased bot: owned → the adapter, else mail to the owner.

A bot (one credential of a platform whose registration names a ``lease_credential``) is
owned by exactly one process of a cluster, through the lease
``bot:<platform>:<12 hex of sha256(credential)>`` (:func:`bot_lease_name`): that process
alone makes the bot's platform calls, so the platform's budget is exact (docs/cluster.md).
Every process builds the bot's :class:`gateway.outbound.pipeline.Outbound` with a
:class:`RelayStage`, which the fold consults at both ends::

    not owned    first: the raw call goes by mail to the owner (gateway.cluster.relay),
                 whose node serves it through the owner's own full fold — so a relayed
                 call is scheduled, redacted and counted once, by the owner. A Latest is
                 asked for its call now; a Delete or React is mailed in the background
                 and not awaited, as the scheduler would queue it.
    owned        last, after schedule → redact → count: a call made while the adapter is
                 starting waits for it; while the lease is no longer locally valid (a
                 paused owner must not reach the platform) the call waits for the node's
                 next renewal (then made) or loss (then mailed to the new owner), at most
                 ``renewal_wait`` seconds, then is refused with ``AdapterError``.

The node drives it: :meth:`owning` when it took the lease (before the adapter starts),
:meth:`renewed` after each renewal, :meth:`lost` when the lease is gone.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable

from adapters.base import AdapterError, SentMessage
from adapters.calls import Call, Delete, React
from core.store.fencing import Fence
from core.tasks import TaskSet
from gateway.cluster.relay import Relay
from gateway.outbound.pipeline import Latest, Outgoing, Perform

logger = logging.getLogger(__name__)

RENEWAL_WAIT = 10.0
"""Default seconds a call waits for a stale lease to be renewed or lost."""


def bot_lease_name(platform: str, credential: str) -> str:
    """``bot:<platform>:<12 hex of sha256(credential)>``: the credential never appears."""
    digest = hashlib.sha256(credential.encode()).hexdigest()[:12]
    return f"bot:{platform}:{digest}"


def _always() -> bool:
    return True


class RelayStage:
    """The :class:`gateway.outbound.pipeline.Relay` of one leased bot (module docstring)."""

    def __init__(self, bot: str, relay: Relay, *, renewal_wait: float = RENEWAL_WAIT) -> None:
        """``bot`` is the bot's lease name; ``renewal_wait`` bounds how long a call waits
        for a stale lease to be renewed or lost (the lease's length)."""
        self.bot = bot
        self._relay = relay
        self._renewal_wait = renewal_wait
        self._fence: Fence | None = None
        self._valid: Callable[[], bool] = _always
        self._running = asyncio.Event()
        self._lease_news = asyncio.Condition()
        self._later = TaskSet(logger)

    @property
    def owned(self) -> bool:
        return self._fence is not None

    @property
    def fence(self) -> Fence | None:
        """The bot lease this process holds (None: another process owns the bot)."""
        return self._fence

    # the node -----------------------------------------------------------------------------
    def owning(self, fence: Fence, valid: Callable[[], bool] = _always) -> asyncio.Event:
        """The lease is ours (``valid`` says whether it still is, locally: ``Leases.valid``);
        calls wait for the returned event, which the node sets once the adapter started
        (or failed to)."""
        if self._fence is None:
            self._running = asyncio.Event()
        else:
            self._running.set()  # already running: a new epoch
        self._fence, self._valid = fence, valid
        return self._running

    async def lost(self) -> None:
        """The lease is gone: calls from now on, and those waiting on it, are mailed."""
        self._fence, self._valid = None, _always
        self._running.set()
        await self._tell_waiters()

    async def renewed(self) -> None:
        """The node renewed the lease: calls waiting on a stale view go on."""
        await self._tell_waiters()

    async def aclose(self) -> None:
        """Mail nothing more in the background (a Delete or React not yet sent is dropped)."""
        await self._later.aclose()

    # the fold -----------------------------------------------------------------------------
    async def mail(self, item: Outgoing) -> SentMessage | None:
        """Not owned: ``item`` made by the owner, raw (its fold schedules it)."""
        call = item.newest() if isinstance(item, Latest) else item
        if call is None:
            return None
        if isinstance(call, Delete | React):
            self._later.spawn(self._relay.perform(self.bot, call), name=f"relay-{self.bot}")
            return None
        return await self._relay.perform(self.bot, call)

    async def __call__(self, call: Call, next: Perform) -> SentMessage | None:
        """Owned: the adapter makes ``call`` once it runs and the lease is valid here; a
        lease lost meanwhile sends it to the new owner."""
        if self._fence is not None and not self._running.is_set():
            await self._running.wait()
        if self._fence is not None and not self._valid():
            await self._await_lease_news()
        if self._fence is not None:
            return await next(call)
        return await self._relay.perform(self.bot, call)

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
