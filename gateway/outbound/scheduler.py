"""One outbound scheduler per bot: a shared send budget, priorities, and the one retry layer.

Every call a bot makes into its platform — send, edit, delete, button answer, typing —
waits here for a permit. The budget is the platform's declared limits
(:class:`adapters.base.Capabilities`: ``bot_limit`` for the whole bot, ``chat_limit`` per
chat, ``group_limit`` per shared chat), each a sliding window or, where the platform allows
short bursts (Telegram's chats), a token bucket (:mod:`gateway.outbound.windows`). A call occupies
its windows from the moment it is started until ``seconds`` after it ended, so however the
network reorders requests the platform never sees more than ``count`` of them in one
window; a bucket refills only while none of its calls is in flight. A call is charged only
to the budgets that count its kind (``Capabilities.charges``): a reaction, a typing
indicator or a button's answer takes nothing from a chat's message budget and never waits
on it. A streamed update (``STREAM`` priority) never takes a chat bucket's last token: that
one is kept for the reply, so drafts never delay the final message.

Waiting calls are started by priority, then in arrival order::

    URGENT    stop notices, approval cards, button answers
    REPLY     final replies (and a progress message edited into one)
    PROGRESS  progress states: the call reads the newest state when it starts, so a
              stale state is never sent (see :mod:`gateway.turns.progress`)
    CLEANUP   deletes and typing; a delete is queued and never awaited by anyone, so it
              cannot hold a session or delay the next turn

A ``RateLimited`` answer is handled here and only here (:mod:`gateway.outbound.rate_limits`): the
chat's calls that count against the same budget are held for ``retry_after`` seconds (other
chats, and the chat's uncounted calls, go on), the chat's bucket is emptied, the call goes
back to its place in the queue, each 429 is logged at INFO and counted
(:attr:`OutboundScheduler.stats`). A waiter cancelled
before its call started withdraws the call; once started, the call runs to its end.

Calls reach the scheduler as values, through each bot's pipeline
(:mod:`gateway.outbound.pipeline`): the call's own ``priority`` and ``coalesce`` key say how it
waits.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
from bisect import insort
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from adapters.base import (
    AdapterError,
    CallKind,
    Capabilities,
    ChatRef,
    InboundEvent,
    RateLimit,
    RateLimited,
)
from adapters.calls import Priority
from core.tasks import TaskSet
from gateway.outbound.rate_limits import MAX_ATTEMPTS, Sleep, may_retry
from gateway.outbound.windows import Budget, budget

logger = logging.getLogger(__name__)

T = TypeVar("T")
ChatId = tuple[str, str]
PRUNE_EVERY = 1000
"""Grants between two sweeps of the per-chat state of chats gone quiet."""


@dataclass(slots=True)
class OutboundStats:
    calls: int = 0
    """Calls started (retries included)."""
    rate_limited: int = 0
    """429s received."""
    given_up: int = 0
    """Calls given up past the retry bounds."""
    withdrawn: int = 0
    """Calls dropped before they started (superseded or their waiter gone)."""


@dataclass(eq=False, slots=True)
class _Job:
    call: Callable[[], Awaitable[Any]]
    chat: ChatRef
    priority: Priority
    seq: int
    what: str
    future: asyncio.Future[Any]
    attempts: int
    coalesce: Hashable | None = None
    kind: CallKind | None = None
    """What the call does (which windows it is charged to); ``None``: every window."""
    attempt: int = 1
    started: bool = False
    waiters: int = 0
    detached: bool = False
    windows: list[Budget] = field(default_factory=list)

    @property
    def order(self) -> tuple[int, int]:
        return (self.priority, self.seq)


def _chat_id(chat: ChatRef) -> ChatId:
    return (chat.platform, chat.chat_id)


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark an unawaited future's exception as seen (the caller may have gone)."""
    if not future.cancelled():
        future.exception()


def _charged(kind: CallKind | None, kinds: frozenset[CallKind]) -> bool:
    return kind is None or kind in kinds


class OutboundScheduler:
    def __init__(
        self,
        capabilities: Capabilities,
        *,
        clock: Callable[[], float] | None = None,
        sleep: Sleep | None = None,
        attempts: int = MAX_ATTEMPTS,
        on_rate_limited: Callable[[ChatRef, float], None] | None = None,
    ) -> None:
        """``clock``/``sleep``: the time the windows are measured on and how a wait for
        one is made (default: the platform's ``capabilities.pace_clock``)."""
        self._bot = budget(capabilities.bot_limit) if capabilities.bot_limit else None
        self._chat_limit, self._group_limit = capabilities.chat_limit, capabilities.group_limit
        self._charges = capabilities.charges
        pace = capabilities.pace_clock
        self._clock, self._sleep = clock or pace.now, sleep or pace.sleep
        self._attempts = attempts
        self.on_rate_limited = on_rate_limited
        """Called with the chat and the wait for every 429 (metrics)."""
        self._chats: dict[ChatId, Budget] = {}
        self._groups: dict[ChatId, Budget] = {}
        self._held: dict[tuple[ChatId, bool], float] = {}
        self._shared: set[ChatId] = set()
        self._waiting: list[_Job] = []
        self._coalesced: dict[Hashable, _Job] = {}
        self._seq = itertools.count()
        self._grants = 0
        self._wake = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None
        self._running = TaskSet(logger)
        self._closed = False
        self.stats = OutboundStats()

    def learn(self, event: InboundEvent) -> None:
        """Take ``event``'s chat kind: a group, channel or thread gets ``group_limit``, a DM
        does not. Only events an adapter validated reach here (an update it could not read
        is a dead letter and never an event), and the newest one wins, so no single event
        paces a chat for good."""
        key = _chat_id(event.chat)
        if event.chat_type == "dm":
            self._shared.discard(key)
        else:
            self._shared.add(key)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    # submitting -------------------------------------------------------------------------
    async def run(
        self,
        call: Callable[[], Awaitable[T]],
        *,
        chat: ChatRef,
        priority: Priority,
        what: str,
        coalesce: Hashable | None = None,
        attempts: int | None = None,
        kind: CallKind | None = None,
    ) -> T:
        """``call()``'s result once the budget allowed it (rate limits waited out).

        ``kind``: what the call does; it occupies only the windows the platform's
        ``Capabilities.charges`` count it in (``None``: every window)."""
        job = self._submit(call, chat, priority, what, coalesce, attempts, kind)
        job.waiters += 1
        try:
            result: T = await asyncio.shield(job.future)
            return result
        except asyncio.CancelledError:
            job.waiters -= 1
            if job.waiters == 0:
                self._abandon(job)
            raise

    def later(
        self,
        call: Callable[[], Awaitable[object]],
        *,
        chat: ChatRef,
        priority: Priority,
        what: str,
        kind: CallKind | None = None,
    ) -> None:
        """Queue ``call`` without waiting for it (cleanup); a failure is logged."""
        job = self._submit(call, chat, priority, what, None, None, kind)
        job.detached = True
        job.future.add_done_callback(partial(_log_failure, what, chat))

    def _submit(
        self,
        call: Callable[[], Awaitable[Any]],
        chat: ChatRef,
        priority: Priority,
        what: str,
        coalesce: Hashable | None,
        attempts: int | None,
        kind: CallKind | None,
    ) -> _Job:
        if self._closed:
            raise AdapterError(f"{what} to {chat} not sent: the gateway is stopping")
        old = self._coalesced.get(coalesce) if coalesce is not None else None
        if old is not None and not old.started:
            old.call = call  # only the newest call of the key is ever made
            self.stats.withdrawn += 1
            return old
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieve)
        job = _Job(
            call, chat, priority, next(self._seq), what, future, attempts or self._attempts,
            coalesce, kind,
        )  # fmt: skip
        self._enqueue(job)
        if coalesce is not None:
            self._coalesced[coalesce] = job
        return job

    def _enqueue(self, job: _Job) -> None:
        insort(self._waiting, job, key=lambda j: j.order)
        if self._pump is None:
            self._pump = asyncio.get_running_loop().create_task(self._run_pump(), name="outbound")
        self._wake.set()

    def _abandon(self, job: _Job) -> None:
        """Nobody waits for ``job`` any more: drop it unless it already started."""
        if job.started or job.future.done():
            job.detached = True
            return
        self._waiting.remove(job)
        self._forget_key(job)
        job.future.cancel()
        self.stats.withdrawn += 1

    def _forget_key(self, job: _Job) -> None:
        if job.coalesce is not None and self._coalesced.get(job.coalesce) is job:
            del self._coalesced[job.coalesce]

    # granting ---------------------------------------------------------------------------
    async def _run_pump(self) -> None:
        while True:
            self._wake.clear()
            delay = self._grant_ready()
            if delay is None:
                await self._wake.wait()
            else:
                await self._nap(delay)

    async def _nap(self, delay: float) -> None:
        """Until ``delay`` passed on the scheduler's clock or a call came or ended."""
        sleeper = asyncio.ensure_future(self._sleep(delay))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait((sleeper, waker), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waker.cancel()

    def _grant_ready(self) -> float | None:
        """Start every waiting call the budget allows now; seconds until the next may
        (None: wait for a new call or an ended one)."""
        now = self._clock()
        next_at = math.inf
        blocked: dict[tuple[ChatId, CallKind | None], float] = {}
        bot_at = self._bot_ready(now)
        index = 0
        while index < len(self._waiting):
            job = self._waiting[index]
            if bot_at > now and self._on_bot(job):
                next_at = min(next_at, bot_at)
                index += 1
                continue
            key = _chat_id(job.chat)
            at = blocked.get((key, job.kind)) or self._ready_at(job, key, now)
            if at <= now:
                del self._waiting[index]
                self._start(job, key)
                if self._on_bot(job):
                    bot_at = self._bot_ready(now)
                continue
            blocked[(key, job.kind)] = at
            next_at = min(next_at, at)
            index += 1
        if not self._waiting or next_at == math.inf:
            return None
        return max(next_at - now, 0.001)

    def _bot_ready(self, now: float) -> float:
        return now if self._bot is None else self._bot.ready_at(now)

    def _on_bot(self, job: _Job) -> bool:
        return self._bot is not None and _charged(job.kind, self._charges.bot)

    def _paced(self, job: _Job) -> bool:
        """``job`` counts against its chat's own budget (so a 429 there holds it)."""
        charges = self._charges
        return _charged(job.kind, charges.chat) or _charged(job.kind, charges.group)

    def _ready_at(self, job: _Job, key: ChatId, now: float) -> float:
        at = self._held.get((key, self._paced(job)), now)
        spare = 1 if job.priority >= Priority.STREAM else 0  # the last token: the reply's
        for window in self._chat_windows(job, key):
            at = max(at, window.ready_at(now, spare))
        return at

    def _chat_windows(self, job: _Job, key: ChatId) -> list[Budget]:
        """The per-chat windows ``job`` is charged to (made when first needed)."""
        windows, charges = [], self._charges
        if self._chat_limit is not None and _charged(job.kind, charges.chat):
            windows.append(self._window(self._chats, key, self._chat_limit))
        shared = key in self._shared and _charged(job.kind, charges.group)
        if self._group_limit is not None and shared:
            windows.append(self._window(self._groups, key, self._group_limit))
        return windows

    def _window(self, windows: dict[ChatId, Budget], key: ChatId, limit: RateLimit) -> Budget:
        window = windows.get(key)
        if window is None:
            window = windows[key] = budget(limit)
        return window

    def _start(self, job: _Job, key: ChatId) -> None:
        job.started = True
        self._forget_key(job)
        job.windows = self._chat_windows(job, key)
        if self._bot is not None and self._on_bot(job):
            job.windows.append(self._bot)
        now = self._clock()
        for window in job.windows:
            window.take(now)
        self.stats.calls += 1
        self._grants += 1
        if self._grants % PRUNE_EVERY == 0:
            self._prune()
        self._running.spawn(self._execute(job), name=f"outbound:{job.what}")

    async def _execute(self, job: _Job) -> None:
        try:
            result = await job.call()
        except asyncio.CancelledError:
            self._ended(job)
            job.future.cancel()
            raise
        except RateLimited as exc:
            self._ended(job, refused=True)
            self._rate_limited(job, exc)
        except Exception as exc:
            self._ended(job)
            if not job.future.done():
                job.future.set_exception(exc)
        else:
            self._ended(job)
            if not job.future.done():
                job.future.set_result(result)

    def _ended(self, job: _Job, *, refused: bool = False) -> None:
        now = self._clock()
        for window in job.windows:
            window.release(now, refused=refused)
        job.windows = []
        self._wake.set()

    def _rate_limited(self, job: _Job, exc: RateLimited) -> None:
        """The one retry layer: hold the chat's calls that count against the same budget
        for ``retry_after`` and queue the call again."""
        self.stats.rate_limited += 1
        if self.on_rate_limited is not None:
            self.on_rate_limited(job.chat, exc.retry_after)
        if not may_retry(exc, job.attempt, job.attempts, job.chat, job.what):
            self.stats.given_up += 1
            job.future.set_exception(exc)
            return
        if job.future.done() or self._closed:
            return
        hold = (_chat_id(job.chat), self._paced(job))
        self._held[hold] = max(self._held.get(hold, 0.0), self._clock() + exc.retry_after)
        job.attempt += 1
        job.started = False
        self._enqueue(job)

    def _prune(self) -> None:
        now = self._clock()
        for windows in (self._chats, self._groups):
            for key in [k for k, w in windows.items() if w.quiet(now)]:
                del windows[key]
        for hold in [h for h, until in self._held.items() if until <= now]:
            del self._held[hold]

    # closing ----------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Refuse new calls, fail the waiting ones, cancel the ones in flight."""
        self._closed = True
        waiting, self._waiting = self._waiting, []
        self._coalesced.clear()
        for job in waiting:
            if job.future.done():
                continue
            if job.detached:
                job.future.cancel()  # cleanup nobody waits for: dropped quietly
            else:
                job.future.set_exception(AdapterError(f"{job.what} not sent: stopping"))
        if self._pump is not None:
            self._pump.cancel()
            await asyncio.wait({self._pump})
            self._pump = None
        await self._running.aclose()


def _log_failure(what: str, chat: ChatRef, future: asyncio.Future[Any]) -> None:
    if future.cancelled():
        return
    exc = future.exception()
    if exc is not None:
        logger.warning("%s in %s failed: %s", what, chat, exc)
