"""A tracked set of tasks: no fire-and-forget.

:class:`TaskSet` keeps every task it spawned until the task ends, then forgets it; a task
that ends by raising is logged (error, with its name and traceback) on the owner's logger.
Closing waits ``grace`` seconds for the tasks, cancels the late ones and waits (time-boxed
by ``CANCEL_SECONDS``) for them to end: a task that ignores cancellation is logged, never
waited on forever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
CANCEL_SECONDS = 10.0
"""How long cancelled tasks are waited for before closing gives up on them (logged)."""

_log = logging.getLogger(__name__)


class TaskSet:
    def __init__(self, logger: logging.Logger = _log) -> None:
        self._logger = logger
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        """Run ``coro`` in a task kept here until it ends."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._forget)
        return task

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait until every task, including any spawned meanwhile, has ended."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def aclose(self, grace: float = 0.0) -> int:
        """Wait ``grace`` seconds for the running tasks, then cancel the late ones and wait
        for them (time-boxed); returns how many were cancelled."""
        tasks = set(self._tasks)
        if not tasks:
            return 0
        late = tasks
        if grace > 0:
            _, late = await asyncio.wait(tasks, timeout=grace)
        for task in late:
            task.cancel()
        if late:
            await self._await_cancelled(late)
        return len(late)

    async def _await_cancelled(self, tasks: set[asyncio.Task[Any]]) -> None:
        _, stuck = await asyncio.wait(tasks, timeout=CANCEL_SECONDS)
        for task in stuck:
            self._logger.error("%s did not end when cancelled", task.get_name())

    def _forget(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._logger.error("%s failed", task.get_name(), exc_info=task.exception())
