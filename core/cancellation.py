"""Cancellation as an object you hold.

A ``CancellationToken`` is handed to every turn. ``cancel(reason)`` is idempotent, wakes
everything waiting on the token and cascades to child tokens (child agents, tools).
``guard(awaitable)`` runs an awaitable and aborts it the moment the token is cancelled,
raising :class:`Cancelled` — this is how an in-flight model call or tool is stopped. Work
that swallows the cancellation does not hold the caller: ``guard`` waits at most
:data:`ABANDON_SECONDS`, then leaves it in a tracked set until it ends (its failure logged).
The same holds when ``guard`` or ``time_boxed`` is itself cancelled: the work is cancelled
and awaited for at most :data:`ABANDON_SECONDS` before the cancellation goes on.
:func:`drain_abandoned` (called at shutdown) cancels and awaits whatever is still left.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

logger = logging.getLogger(__name__)


class Cancelled(Exception):
    """The turn's token was cancelled; ``reason`` says why (e.g. ``"cancelled"``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CancellationToken:
    def __init__(self, parent: CancellationToken | None = None) -> None:
        self._event = asyncio.Event()
        self.cancelled = False
        """Whether :meth:`cancel` was called (read it; never set it)."""
        self._reason: str | None = None
        self._children: list[CancellationToken] = []
        self._guards: set[Callable[[object], None]] = set()
        """How each :meth:`guard` waiting now is woken by :meth:`cancel`."""
        if parent is not None:
            parent._children.append(self)
            if parent.cancelled:
                self.cancel(parent.reason or "cancelled")

    @property
    def reason(self) -> str | None:
        return self._reason

    def cancel(self, reason: str = "cancelled") -> None:
        if self.cancelled:
            return
        self.cancelled = True
        self._reason = reason
        self._event.set()
        for wake in list(self._guards):
            wake(None)
        for child in self._children:
            child.cancel(reason)

    def child(self) -> CancellationToken:
        return CancellationToken(parent=self)

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise Cancelled(self._reason or "cancelled")

    async def wait(self) -> None:
        await self._event.wait()

    @staticmethod
    async def time_boxed(awaitable: Awaitable[T], seconds: float) -> T:
        """Await ``awaitable`` for at most ``seconds``; then abandon it, ``TimeoutError``."""
        work = asyncio.ensure_future(awaitable)
        try:
            await asyncio.wait({work}, timeout=seconds)
        except asyncio.CancelledError:
            await _abandon(work)
            raise
        if work.done():
            return work.result()
        await _abandon(work)
        raise TimeoutError(f"gave up after {seconds}s")

    async def guard(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` unless the token is cancelled first; then abort it.

        One future is woken by whichever comes first, the work's end or :meth:`cancel`
        (no helper task, no waiter left behind)."""
        if self.cancelled:
            _discard(awaitable)
            raise Cancelled(self._reason or "cancelled")
        work = asyncio.ensure_future(awaitable)
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake(_: object) -> None:
            if not woken.done():
                woken.set_result(None)

        work.add_done_callback(wake)
        self._guards.add(wake)
        try:
            await woken
        except asyncio.CancelledError:
            await _abandon(work)
            raise
        finally:
            self._guards.discard(wake)
            work.remove_done_callback(wake)
        if work.done():
            return work.result()
        await _abandon(work)
        raise Cancelled(self._reason or "cancelled")


ABANDON_SECONDS = 0.05
"""How long ``guard`` and ``time_boxed`` wait for cancelled work to wind down before
leaving it to the tracked set (also when they are cancelled themselves)."""

_abandoned: set[asyncio.Future[Any]] = set()
"""Cancelled work that ignored the cancellation: tracked until it ends, failures logged."""


async def _abandon(work: asyncio.Future[Any]) -> None:
    """Cancel ``work`` and track it until it ends; wait for that at most ABANDON_SECONDS.

    It is tracked before the wait, so even if the caller is cancelled while waiting the
    work is not lost: :func:`drain_abandoned` still finds it.
    """
    if work.done():
        _log_failure(work)
        return
    work.cancel()
    _abandoned.add(work)
    work.add_done_callback(_forget)
    await asyncio.wait({work}, timeout=ABANDON_SECONDS)
    if not work.done():
        logger.warning("cancelled work %r ignores cancellation; left to finish on its own", work)


def _forget(work: asyncio.Future[Any]) -> None:
    _abandoned.discard(work)
    _log_failure(work)


def _log_failure(work: asyncio.Future[Any]) -> None:
    if not work.cancelled() and work.exception() is not None:
        logger.error("cancelled work failed", exc_info=work.exception())


def abandoned_count() -> int:
    """Cancelled work still running after ``guard`` gave up on it (for tests and metrics)."""
    return len(_abandoned)


async def drain_abandoned(timeout: float) -> int:
    """Cancel all abandoned work again and await it for at most ``timeout`` seconds (shutdown).

    Returns how many are still running when the time is up (0: everything ended); those
    are logged and stay tracked.
    """
    left = set(_abandoned)
    if not left:
        return 0
    for work in left:
        work.cancel()
    _, pending = await asyncio.wait(left, timeout=timeout)
    for work in pending:
        logger.warning("cancelled work %r still running at shutdown", work)
    return len(pending)


def _discard(awaitable: Awaitable[object]) -> None:
    """Close a never-started coroutine (or cancel a future) so nothing leaks a warning."""
    if inspect.iscoroutine(awaitable):
        awaitable.close()
    elif isinstance(awaitable, asyncio.Future):
        awaitable.cancel()
