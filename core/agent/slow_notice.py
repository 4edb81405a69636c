"""The slow-model notice of one model call: about silence, not about duration.

(``docs/turn-loop.md`` §4, "The slow notice".) A :class:`SilenceWatch` runs beside a model
call (its retries and backoff included) and tells the turn's notice callback:

- :class:`~core.agent.step.ModelSlow` once nothing has arrived for ``seconds``: not since
  the call began, nor since the last streamed chunk (:meth:`SilenceWatch.heard`, called on
  every chunk, resets the wait). A stream that keeps flowing never gets a notice, however
  long it runs; one that stalls does. On the first attempt it says the call still waits;
  ``retrying`` is true only when an attempt failed and another is under way;
- another ``ModelSlow`` at once when a retry starts while a notice is showing (the chat
  edits its notice to say so);
- :class:`~core.agent.step.ModelSlowEnded` when the answer starts to flow after a notice,
  so the chat removes it (at the latest when the call ends: :meth:`SilenceWatch.close`).
  A call that ends while its notice shows and nothing flowed (a whole non-streamed
  answer, a failure) hears nothing more: the next step or the end of the turn removes it
  (the gateway's part, ``gateway/turns/progress.py``).

Until the call has been silent for ``seconds`` the watch is a timer of the event loop
(:meth:`SilenceWatch.start`), re-armed when a chunk moved the deadline: a call that
answers in time costs no task. At the first silence the watching task starts
(:meth:`SilenceWatch.run`); it is cancelled when the call ends (:meth:`SilenceWatch.stop`),
so a callback that hangs never holds a silent call's reply (a withdrawal at the end is
time-boxed like every notice, ``core.agent.step.OBSERVER_SECONDS``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from core.agent.step import ModelSlow, ModelSlowEnded, TurnNotice

Tell = Callable[[TurnNotice], Awaitable[None]]


class SilenceWatch:
    def __init__(self, seconds: float, iteration: int, max_attempts: int, tell: Tell) -> None:
        self._seconds, self._iteration, self._max_attempts = seconds, iteration, max_attempts
        self._tell = tell
        self.attempt = 0
        self.last_error: str | None = None
        self._heard = time.monotonic()
        self._told_at: float | None = None
        """When the notice showing was given (None: none is showing)."""
        self._told_attempt = 0
        self._wake = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._name = ""

    # armed and stopped by the call -----------------------------------------------------
    def start(self, name: str) -> None:
        """Arm the watch: a timer until the first silence, then the task ``name``."""
        self._name = name
        self._arm(self._seconds - (time.monotonic() - self._heard))

    async def stop(self) -> None:
        """The call ended: disarm the timer, end the watching task if it started, and
        withdraw a notice the answer made stale (:meth:`close`)."""
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})  # the notice callback is itself time-boxed
        await self.close()

    def _arm(self, delay: float) -> None:
        self._timer = asyncio.get_running_loop().call_later(max(delay, 0.0), self._check)

    def _check(self) -> None:
        """The timer fired: silent for ``seconds`` now, the watching task starts; else a
        chunk moved the deadline and the timer is armed again for it."""
        quiet = time.monotonic() - self._heard
        if quiet < self._seconds:
            self._arm(self._seconds - quiet)
            return
        self._timer = None
        self._task = asyncio.create_task(self.run(), name=self._name)

    # fed by the call -----------------------------------------------------------------
    def heard(self) -> None:
        """A chunk arrived (sync, cheap: called on every streamed event)."""
        self._heard = time.monotonic()
        if self._told_at is not None:
            self._wake.set()

    def attempt_started(self) -> None:
        self.attempt += 1
        if self._told_at is not None:
            self._wake.set()

    def failed(self, detail: str) -> None:
        self.last_error = detail

    # the watching task ---------------------------------------------------------------
    async def run(self) -> None:
        while True:
            if self._told_at is None:
                await self._until_silent()
                await self._slow()
                continue
            await self._wake.wait()
            self._wake.clear()
            if self._heard > self._told_at:
                self._told_at = None
                await self._tell(ModelSlowEnded(self._iteration))
            elif self.attempt != self._told_attempt:
                await self._slow()

    async def close(self) -> None:
        """The call ended (its watching task cancelled): an answer that flowed after the
        notice withdraws it now, if the task had no time to (a fast stream's end)."""
        if self._told_at is not None and self._heard > self._told_at:
            self._told_at = None
            await self._tell(ModelSlowEnded(self._iteration))

    async def _until_silent(self) -> None:
        """Sleep until ``seconds`` after the last chunk; a chunk moves that deadline, and
        waking per chunk would cost a task switch each, so the sleep is re-checked."""
        while True:
            quiet = time.monotonic() - self._heard
            if quiet >= self._seconds:
                return
            await asyncio.sleep(self._seconds - quiet)

    async def _slow(self) -> None:
        now = time.monotonic()
        self._told_at, self._told_attempt = now, self.attempt
        notice = ModelSlow(
            iteration=self._iteration,
            attempt=max(self.attempt, 1),
            max_attempts=self._max_attempts,
            waited=now - self._heard,
            last_error=self.last_error,
        )
        await self._tell(notice)
