"""Cancellation as an object you hold.

A ``CancellationToken`` is handed to every turn. ``cancel(reason)`` is idempotent, wakes
everything waiting on the token and cascades to child tokens (child agents, tools).
``guard(awaitable)`` runs an awaitable and aborts it the moment the token is cancelled,
raising :class:`Cancelled` — this is how an in-flight model call or tool is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class Cancelled(Exception):
    """The turn's token was cancelled; ``reason`` says why (e.g. ``"cancelled"``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CancellationToken:
    def __init__(self, parent: CancellationToken | None = None) -> None:
        self._event = asyncio.Event()
        self._reason: str | None = None
        self._children: list[CancellationToken] = []
        if parent is not None:
            parent._children.append(self)
            if parent.cancelled:
                self.cancel(parent.reason or "cancelled")

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str | None:
        return self._reason

    def cancel(self, reason: str = "cancelled") -> None:
        if self._event.is_set():
            return
        self._reason = reason
        self._event.set()
        for child in self._children:
            child.cancel(reason)

    def child(self) -> CancellationToken:
        return CancellationToken(parent=self)

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise Cancelled(self._reason or "cancelled")

    async def wait(self) -> None:
        await self._event.wait()

    async def guard(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` unless the token is cancelled first; then abort it."""
        if self.cancelled:
            _discard(awaitable)
            raise Cancelled(self._reason or "cancelled")
        work = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            work.cancel()
            raise
        finally:
            stop.cancel()
        if work.done():
            return work.result()
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(work), timeout=1.0)
        raise Cancelled(self._reason or "cancelled")


def _discard(awaitable: Awaitable[object]) -> None:
    """Close a never-started coroutine (or cancel a future) so nothing leaks a warning."""
    if inspect.iscoroutine(awaitable):
        awaitable.close()
    elif isinstance(awaitable, asyncio.Future):
        awaitable.cancel()
