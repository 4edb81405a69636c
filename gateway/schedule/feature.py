"""``[schedule] enabled``: scheduled turns put together on a running service — the chat
commands, the ``schedule`` tool (for each profile whose ``tools`` list is unset or names
it), ``/stop`` reaching isolated runs, the result watch and the scheduler as a service part
(started after the adapters, closed before them). Off, nothing of this is
imported (gateway/wiring.py)."""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from adapters.base import InboundEvent
from core.hooks.results import AskUser
from core.schedule.scheduler import Scheduler, SchedulerConfig
from core.store.jobs import JobBook, job_book
from core.tools.schedule import schedule_tool
from gateway.config.schedule import ScheduleSection
from gateway.control.commands import Reply
from gateway.control.schedule import ScheduleCommands
from gateway.outbound.messages import NOTHING_TO_STOP
from gateway.schedule.runner import ResultWatch, ScheduledTurns
from gateway.web.schedule_status import JobsPanel

if TYPE_CHECKING:
    from gateway.service import GatewayService

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


def new_owner() -> str:
    """Who claims runs here: host, pid and a random part (unique per process start)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class ScheduleFeature:
    """Scheduled turns of one service (a :class:`gateway.service.ServicePart`)."""

    def __init__(
        self, service: GatewayService, config: ScheduleSection, *, clock: Clock = time.time,
        sleep: Sleep = asyncio.sleep, owner: str | None = None,
    ) -> None:  # fmt: skip
        self.config = config
        self.book: JobBook = job_book(service.store)
        directory = service.directory
        self.watch = ResultWatch(service.result_hook, lambda key: directory.place(key) is not None)
        service.result_hook = self.watch
        access = service.router.access
        self.turns = ScheduledTurns(
            service, self.book, self.watch, session=config.session,
            may_run=access.allows,
        )  # fmt: skip
        self.commands = ScheduleCommands(self.book, config, service.approvers_of)
        self._owner = owner or new_owner()
        self.use_clock(clock, sleep)
        self._service = service
        self._task: asyncio.Task[None] | None = None
        service.router.command_handlers.update(self.commands.handlers())
        tool = schedule_tool(self.commands.from_tool)
        for agent in service.agents.values():
            names = agent.profile.tools
            if names is None or tool.spec.name in names:
                agent.tools.register(tool)
        service.router.command_handlers["stop"] = self._stop
        if config.ask_in_profiles:
            agent = next(iter(service.agents.values()))
            agent.hooks.register("pre_tool_call", self._ask_first, source="schedule: ask first")
        service.parts.append(self)
        service.dashboard_extras["jobs"] = JobsPanel(self.book).current

    def use_clock(self, clock: Clock, sleep: Sleep) -> None:
        """Run on ``clock`` and wait with ``sleep`` (before :meth:`start`; tests move a
        manual clock): a new scheduler, the commands reading the same clock."""
        self.scheduler = Scheduler(
            self.book, self.turns, owner=self._owner, clock=clock, sleep=sleep,
            config=SchedulerConfig(
                missed=self.config.missed,
                pause_after_failed_deliveries=self.config.pause_after_failed_deliveries,
            ),
        )  # fmt: skip
        self.commands.clock = clock
        self.commands.run_now = self.scheduler.run_now
        self.commands.changed = self.scheduler.wake

    async def start(self) -> None:
        self._task = asyncio.create_task(self.scheduler.serve(), name="scheduler")

    async def aclose(self) -> None:
        """Stop claiming; cancel the runs going here (their leases lapse, and the next
        scheduler marks them interrupted)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self.scheduler.aclose()

    def _ask_first(
        self, *, tool_name: str, arguments: dict[str, Any], session_key: str, **_: Any
    ) -> AskUser | None:
        """The ``schedule`` tool in a profile of ``ask_in_profiles``: ask the person first."""
        if tool_name != "schedule":
            return None
        agent = self._service.agent_for(session_key)
        names = [n for n, a in self._service.agents.items() if a is agent]
        if not set(names) & set(self.config.ask_in_profiles):
            return None
        when = next((f"{k} {arguments[k]}" for k in ("at", "every", "cron") if k in arguments), "")
        return AskUser(f"Schedule a job ({when}): {arguments.get('prompt', '')}?")

    async def _stop(self, event: InboundEvent, key: str, args: str) -> Reply:
        """``/stop``: the chat's own turn as always, and its isolated scheduled runs."""
        runs = self.turns.stop_in(key)
        if await self._service.router.stop(key):
            return None
        return "⏹ Stopped the scheduled run." if runs else NOTHING_TO_STOP
