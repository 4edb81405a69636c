"""A model call's streamed text, relayed to the turn's listener (``docs/turn-loop.md`` §16).

One :class:`TextRelay` per model call of a streaming profile. The model client hands it
each text fragment (``ModelRequest.on_delta``); the relay never waits for the listener.
One pump task delivers the newest state, one event at a time, so a slow listener sees
fewer, larger steps (:attr:`ReplyText.delta` is everything it has not seen yet) and the
model's stream is never held up. Each delivery is an observer call
(:func:`core.agent.step.observe`): time-boxed, its errors logged and ignored, under the
turn's token. Once the token is cancelled, what is left (the ``stopped`` reset) is
delivered without it, boxed to :data:`STOPPED_SECONDS`.

A reset (:meth:`TextRelay.reset`) drops the attempt's text; the listener is told
(:class:`ReplyTextReset`) only when it was shown some of it. :meth:`TextRelay.close` ends
the call — with a reset reason when the text is not the answer, ``None`` when it stands —
and waits (at most :data:`DRAIN_SECONDS`) until the listener has had every event of the
call, so nothing of this call reaches it after the call returned (a reply delivered later
never races a late delta); a listener still busy then is abandoned.
"""

from __future__ import annotations

import asyncio
from functools import partial

from core.agent.step import (
    OBSERVER_SECONDS,
    ReplyText,
    ReplyTextReset,
    ResetReason,
    TextCallback,
    TextEvent,
    observe,
)
from core.cancellation import CancellationToken

STOPPED_SECONDS = 0.25
"""Time box for each event delivered after the turn was stopped."""
DRAIN_SECONDS = OBSERVER_SECONDS
"""How long the end of a call waits for the listener to have every event of it."""


class TextRelay:
    """Feeds one model call's text to ``callback``; see the module docstring."""

    def __init__(self, callback: TextCallback, iteration: int, token: CancellationToken) -> None:
        self._callback = callback
        self._iteration = iteration
        self._token = token
        self._parts: list[str] = []
        self._shown = 0
        """Characters of this attempt's text the listener was handed."""
        self._seen = False
        """The listener holds text a reset must clear."""
        self._reset_due: ResetReason | None = None
        self._wake = asyncio.Event()
        self._closing = False
        self._pump: asyncio.Task[None] | None = None

    async def feed(self, fragment: str) -> None:
        """The model client's ``on_delta``: returns at once."""
        if self._closing or not fragment:
            return
        self._parts.append(fragment)
        self._wake.set()
        if self._pump is None:
            name = f"reply-text:{self._iteration}"
            self._pump = asyncio.create_task(self._run(), name=name)

    def reset(self, reason: ResetReason) -> None:
        """Drop the text so far; the listener hears ``reason`` if it was shown any."""
        self._parts.clear()
        self._shown = 0
        if self._seen:
            self._seen = False
            self._reset_due = reason
            self._wake.set()

    async def close(self, reason: ResetReason | None) -> None:
        """End the call (``reason``: its text is not the answer) and drain the pump."""
        if reason is not None:
            self.reset(reason)
        self._closing = True
        self._wake.set()
        if self._pump is None:
            return
        await asyncio.wait({self._pump}, timeout=DRAIN_SECONDS)
        if not self._pump.done():  # a listener that hangs: it hears no more of this call
            self.abandon()

    def abandon(self) -> None:
        """The task itself is being cancelled: stop delivering, wait for nothing."""
        self._closing = True
        if self._pump is not None:
            self._pump.cancel()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while (event := self._next()) is not None:
                await self._deliver(event)
            if self._closing:
                return

    def _next(self) -> TextEvent | None:
        if self._reset_due is not None:
            reset = ReplyTextReset(self._iteration, self._reset_due)
            self._reset_due = None
            return reset
        text = "".join(self._parts)
        if len(text) <= self._shown:
            return None
        event = ReplyText(self._iteration, text, text[self._shown :])
        self._shown, self._seen = len(text), True
        return event

    async def _deliver(self, event: TextEvent) -> None:
        what = f"text callback ({type(event).__name__}, iteration {self._iteration})"
        told = partial(self._callback, event)
        if self._token.cancelled:
            await observe(told, None, what, STOPPED_SECONDS)
        else:
            await observe(told, self._token, what, OBSERVER_SECONDS)
