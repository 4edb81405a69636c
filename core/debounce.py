"""Rapid messages merged into one turn (``debounce_ms``, docs/turn-loop.md §20).

When a session is idle, the Dispatcher does not start a text message's turn at once: it
opens a :class:`Window` of ``debounce_ms``. Each further text message from the same person
in that session arriving before the window closes joins it and moves its end to
``debounce_ms`` after itself; when the window closes, the messages run as ONE turn
(:func:`merged`): their texts joined in arrival order, one a line, every file kept, and
every origin remembered (``UserMessage.origin`` + ``also``) so that a replay of any of
their updates after a crash finds the one stored message instead of running it twice.

A message the window cannot take closes it first (the merged turn starts now) and is then
placed as usual: one from another person, a second message with files (the files of one
turn come from one update), or a batch already :data:`MAX_MERGED` long. Commands, button
presses and forced messages (``/queue``) never wait in a window.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple

from core.agent.turn import UserMessage

Sleep = Callable[[float], Awaitable[None]]


class Pace(NamedTuple):
    """The clock a window is measured on and the sleep it waits with (tests inject both)."""

    clock: Callable[[], float] = time.monotonic
    sleep: Sleep = asyncio.sleep


REAL_TIME = Pace()
"""The wall clock (monotonic) and ``asyncio.sleep``."""

MAX_MERGED = 20
"""At most this many messages in one merged turn; the next one starts the turn."""


def joins(batch: Sequence[UserMessage], message: UserMessage) -> bool:
    """Whether ``message`` may join the gathered ``batch`` (see the module docstring)."""
    if not batch or len(batch) >= MAX_MERGED:
        return False
    if any(m.sender_id != message.sender_id for m in batch):
        return False
    return not (message.attachments and any(m.attachments for m in batch))


def merged(batch: Sequence[UserMessage]) -> UserMessage:
    """One message holding all of ``batch``: texts joined in order, files kept; its origin
    is that of the message with files (their rows are kept under it), else the first's."""
    if len(batch) == 1:
        return batch[0]
    lead = next((m for m in batch if m.attachments), batch[0])
    texts = [m.text for m in batch if m.text.strip()]
    others = tuple(origin for m in batch if m is not lead for origin in m.origins)
    return UserMessage(
        "\n".join(texts),
        sender_id=lead.sender_id,
        sender_name=lead.sender_name,
        origin=lead.origin,
        attachments=lead.attachments,
        also=(*lead.also, *others),
    )


class Window:
    """A wait until ``seconds`` after the latest message (:meth:`extend`), which
    :meth:`close` cuts short at once (``/stop``, a message that cannot join, shutdown)."""

    def __init__(self, seconds: float, pace: Pace) -> None:
        self._seconds, self._clock, self._sleep = seconds, pace.clock, pace.sleep
        self._deadline = self._clock() + seconds
        self._timer: asyncio.Future[None] | None = None
        self.closed = False

    def extend(self) -> None:
        """A message joined: the window now ends ``seconds`` after it."""
        self._deadline = self._clock() + self._seconds

    def close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()

    async def wait(self) -> None:
        """Return once the window has closed (its end reached, or :meth:`close`)."""
        while not self.closed:
            left = self._deadline - self._clock()
            if left <= 0:
                break
            self._timer = asyncio.ensure_future(self._sleep(left))
            try:
                await asyncio.wait({self._timer})  # a close cancels the timer, not us
            finally:
                self._timer.cancel()
                self._timer = None
        self.closed = True
