"""The "is thinking…" status of a Slack thread (``assistant.threads.setStatus``), held as
a lease so that it is always cleared.

The gateway calls ``typing(chat)`` when a turn starts and refreshes it while the turn
works; it pauses the refresh while an approval waits (the status disables the thread's
compose box) and simply stops when the turn ends, is stopped or fails. So each call
(re)arms a lease of ``lease`` seconds; the status is cleared when

* the adapter posts into that thread (the reply, a card, a notice: Slack clears it on a
  post too; clearing it ourselves also forgets the lease), or
* the lease runs out without a refresh.

Setting and clearing are best effort: a thread Slack will not show a status in
(``invalid_thread_ts``, a missing scope) is logged at debug level, never raised.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from core.tasks import TaskSet

_log = logging.getLogger(__name__)

Thread = tuple[str, str]
SetStatus = Callable[[str, str, str], Awaitable[object]]
"""``(channel, thread_ts, status)`` → the Web API call; ``""`` clears."""


class ThreadStatus:
    def __init__(self, set_status: SetStatus, *, text: str, lease: float) -> None:
        self._set_status, self.text, self.lease = set_status, text, lease
        self._deadlines: dict[Thread, float] = {}
        self._timers = TaskSet(_log)

    def active(self, thread: Thread) -> bool:
        return thread in self._deadlines

    async def show(self, thread: Thread) -> None:
        """Set (or refresh) the status and its lease."""
        fresh = thread not in self._deadlines
        self._deadlines[thread] = time.monotonic() + self.lease
        if fresh:
            self._timers.spawn(self._expire(thread), name=f"slack-status:{thread}")
        await self._call(thread, self.text)

    async def clear(self, thread: Thread) -> None:
        """Clear the status now (nothing to do when none is set)."""
        if self._deadlines.pop(thread, None) is not None:
            await self._call(thread, "")

    async def _expire(self, thread: Thread) -> None:
        while (deadline := self._deadlines.get(thread)) is not None:
            wait = deadline - time.monotonic()
            if wait <= 0:
                await self.clear(thread)
                return
            await asyncio.sleep(wait)

    async def _call(self, thread: Thread, status: str) -> None:
        try:
            await self._set_status(thread[0], thread[1], status)
        except Exception as exc:
            _log.debug("slack: status %r in %s not set: %s", status, thread, exc)

    async def aclose(self) -> None:
        """Clear every status still shown, then stop the timers."""
        for thread in list(self._deadlines):
            await self.clear(thread)
        await self._timers.aclose()
