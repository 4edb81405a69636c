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

A call that finds no call waiting and its budgets free starts at once, in the caller's
turn of the event loop (one look at its windows, no round through the queue); any other
waits. Waiting calls are started by priority, then in arrival order::

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

Each call runs in its own task, in its caller's context (:mod:`contextvars`: a call started
at once in a copy of the caller's, a queued one in the copy taken when it was queued), so
it is made under its caller's fence (:mod:`core.store.fencing`) and inside its trace,
whichever call started the pump.

Calls reach the scheduler as values, through each bot's pipeline
(:mod:`gateway.outbound.pipeline`): the call's own ``priority`` and ``coalesce`` key say how it
waits.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import math
from bisect import insort
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from functools import partial
from operator import attrgetter
from typing import Any, TypeVar, get_args

from adapters.base import (
    AdapterError,
    CallKind,
    Capabilities,
    ChatRef,
    InboundEvent,
    RateLimited,
)
from adapters.calls import Priority
from core.tasks import TaskSet
from gateway.outbound.rate_limits import MAX_ATTEMPTS, Sleep, may_retry
from gateway.outbound.windows import Budget, budget_maker

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


@dataclass(frozen=True, slots=True)
class _Charge:
    """The budgets one call kind is charged to on one bot (``Capabilities.charges`` and
    the limits it declares), worked out once per scheduler (:func:`_charge_table`)."""

    bot: bool
    """Charged to the bot's window (the bot has one and it counts the kind)."""
    chat: bool
    """Charged to the chat's own window (the bot has ``chat_limit``, counting the kind)."""
    group: bool
    """Charged to a shared chat's window, when the chat is one (``group_limit``)."""
    paced: bool
    """Counted against the chat's own budget, so a 429 there holds it."""


def _charge_table(capabilities: Capabilities) -> dict[CallKind | None, _Charge]:
    """Each call kind's :class:`_Charge` (``None``: a call of no kind, charged everywhere)."""
    charges = capabilities.charges
    table: dict[CallKind | None, _Charge] = {}
    for kind in (None, *get_args(CallKind)):
        chat, group = kind is None or kind in charges.chat, kind is None or kind in charges.group
        table[kind] = _Charge(
            bot=capabilities.bot_limit is not None and (kind is None or kind in charges.bot),
            chat=capabilities.chat_limit is not None and chat,
            group=capabilities.group_limit is not None and group,
            paced=chat or group,
        )
    return table


@dataclass(eq=False, slots=True)
class _Job:
    call: Callable[[], Awaitable[Any]]
    chat: ChatRef
    key: ChatId
    """``chat`` as the scheduler's maps key it."""
    priority: Priority
    order: tuple[int, int]
    """Its place in the queue: priority, then arrival."""
    what: str
    future: asyncio.Future[Any]
    attempts: int
    coalesce: Hashable | None
    kind: CallKind | None
    """What the call does (which windows it is charged to); ``None``: every window."""
    charge: _Charge
    attempt: int = 1
    started: bool = False
    waiters: int = 0
    detached: bool = False
    windows: tuple[Budget, ...] = ()
    context: contextvars.Context | None = None
    """The caller's context the call runs in, taken when it was queued (None: started
    at once, in a task that copies the caller's own)."""


_ORDER = attrgetter("order")


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark an unawaited future's exception as seen (the caller may have gone)."""
    if not future.cancelled():
        future.exception()


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
        bot_limit = capabilities.bot_limit
        self._bot = budget_maker(bot_limit)() if bot_limit else None
        chat_limit, group_limit = capabilities.chat_limit, capabilities.group_limit
        self._chat_budget = budget_maker(chat_limit) if chat_limit else None
        self._group_budget = budget_maker(group_limit) if group_limit else None
        self._charge = _charge_table(capabilities)
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
        key = (event.chat.platform, event.chat.chat_id)
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
            old.context = contextvars.copy_context()  # ... in its own caller's context
            self.stats.withdrawn += 1
            return old
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        job = _Job(
            call, chat, (chat.platform, chat.chat_id), priority, (priority, next(self._seq)),
            what, future, attempts or self._attempts, coalesce, kind, self._charge[kind],
        )  # fmt: skip
        if not self._waiting and self._started_at_once(job):
            return job
        job.context = contextvars.copy_context()
        self._enqueue(job)
        if coalesce is not None:
            self._coalesced[coalesce] = job
        return job

    def _started_at_once(self, job: _Job) -> bool:
        """Start ``job`` now if its budgets allow it (nothing waits before it)."""
        now = self._clock()
        if job.charge.bot and self._bot is not None and self._bot.ready_at(now) > now:
            return False
        windows = self._chat_windows(job)
        if self._ready_at(job, windows, now) > now:
            return False
        self._start(job, windows)
        return True

    def _enqueue(self, job: _Job) -> None:
        if self._waiting:
            insort(self._waiting, job, key=_ORDER)
        else:
            self._waiting.append(job)
        if self._pump is None:
            self._pump = asyncio.get_running_loop().create_task(self._run_pump(), name="outbound")
        self._wake.set()

    def _abandon(self, job: _Job) -> None:
        """Nobody waits for ``job`` any more: drop it unless it already started."""
        if job.started or job.future.done():
            job.detached = True
            job.future.add_done_callback(_retrieve)
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
        """Until ``delay`` passed on the scheduler's clock or a call came or ended: the
        sleep's end sets the wake like a call does."""
        sleeper = asyncio.ensure_future(self._sleep(delay))
        sleeper.add_done_callback(self._slept)
        try:
            await self._wake.wait()
        finally:
            sleeper.remove_done_callback(self._slept)
            sleeper.cancel()

    def _slept(self, _: object) -> None:
        self._wake.set()

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
            if bot_at > now and job.charge.bot:
                next_at = min(next_at, bot_at)
                index += 1
                continue
            at = blocked.get((job.key, job.kind))
            if at is None:
                windows = self._chat_windows(job)
                at = self._ready_at(job, windows, now)
                if at <= now:
                    del self._waiting[index]
                    self._start(job, windows)
                    if job.charge.bot:
                        bot_at = self._bot_ready(now)
                    continue
                blocked[(job.key, job.kind)] = at
            next_at = min(next_at, at)
            index += 1
        if not self._waiting or next_at == math.inf:
            return None
        return max(next_at - now, 0.001)

    def _bot_ready(self, now: float) -> float:
        return now if self._bot is None else self._bot.ready_at(now)

    def _ready_at(self, job: _Job, windows: tuple[Budget, ...], now: float) -> float:
        """When ``job`` may start as far as its chat goes (held after a 429, ``windows``)."""
        at = self._held.get((job.key, job.charge.paced), now) if self._held else now
        spare = 1 if job.priority >= Priority.STREAM else 0  # the last token: the reply's
        for window in windows:
            at = max(at, window.ready_at(now, spare))
        return at

    def _chat_windows(self, job: _Job) -> tuple[Budget, ...]:
        """The per-chat windows ``job`` is charged to (made when first needed)."""
        charge, key = job.charge, job.key
        chat = group = None
        if charge.chat and self._chat_budget is not None:
            chat = self._chats.get(key)
            if chat is None:
                chat = self._chats[key] = self._chat_budget()
        if charge.group and key in self._shared and self._group_budget is not None:
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = self._group_budget()
        if group is None:
            return () if chat is None else (chat,)
        return (group,) if chat is None else (chat, group)

    def _start(self, job: _Job, windows: tuple[Budget, ...]) -> None:
        """Start ``job``, charged to ``windows`` (its chat's) and the bot's if it counts."""
        job.started = True
        if job.coalesce is not None:
            self._forget_key(job)
        if job.charge.bot and self._bot is not None:
            windows = (*windows, self._bot)
        job.windows = windows
        now = self._clock()
        for window in windows:
            window.take(now)
        self.stats.calls += 1
        self._grants += 1
        if self._grants % PRUNE_EVERY == 0:
            self._prune()
        name = f"outbound:{job.what}"
        if job.context is None:  # started at once: the task copies the caller's context
            self._running.spawn(self._execute(job), name)
        else:
            job.context.run(self._running.spawn, self._execute(job), name)

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
        job.windows = ()
        if self._waiting:  # nothing waits: no round of the pump
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
        hold = (job.key, job.charge.paced)
        self._held[hold] = max(self._held.get(hold, 0.0), self._clock() + exc.retry_after)
        job.attempt += 1
        job.started = False
        job.context = job.context or contextvars.copy_context()  # (in the call's own task)
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
