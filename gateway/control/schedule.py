"""The chat commands of scheduled turns (README "Scheduled turns"):

* ``/every 1h <prompt>``, ``/at 2027-01-15 09:00 <prompt>``, ``/at 09:00 <prompt>``,
  ``/cron "0 9 * * 1" <prompt>`` — a job that runs ``<prompt>`` and answers in this chat;
  times are read in the person's zone (``/tz``, else ``[schedule] timezone``);
* ``/tz Europe/Berlin`` — the person's zone (``/tz`` alone shows it);
* ``/jobs`` — the person's jobs with their next run and last outcome; ``/jobs pause|resume|
  delete|run ID`` — only the job's creator or an approver of the platform may.
"""

from __future__ import annotations

import shlex
import time
import uuid
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field

from adapters.base import ChatRef, InboundEvent
from adapters.session_keys import parse_session_key
from core.schedule.times import (
    Kind,
    Schedule,
    ScheduleError,
    check_cron,
    parse_at,
    parse_interval,
    wall_clock,
    zone,
)
from core.store.jobs import Job, JobBook, JobRun
from core.tools.base import ToolContext
from core.tools.schedule import ScheduleRequest
from gateway.config.schedule import ScheduleSection
from gateway.control.access import qualified
from gateway.control.commands import CommandHandler, Reply

RunNow = Callable[[Job], Awaitable[JobRun | None]]
ACTIONS = ("pause", "resume", "delete", "run")
CHILD_MARK = "/child:"
USAGE: dict[Kind, str] = {
    "every": "Usage: /every 1h <prompt>",
    "at": "Usage: /at 2027-01-15 09:00 <prompt> or /at 09:00 <prompt>",
    "cron": 'Usage: /cron "0 9 * * 1" <prompt>',
}


@dataclass
class ScheduleCommands:
    """``/every``, ``/at``, ``/cron``, ``/tz`` and ``/jobs`` on one store."""

    book: JobBook
    config: ScheduleSection
    approvers: Callable[[str], Collection[str]]
    """A session key's approvers, platform-qualified."""
    profile: str = "default"
    clock: Callable[[], float] = time.time
    run_now: RunNow | None = None
    changed: Callable[[], None] = field(default=lambda: None)
    """Told when a job was added or changed (the scheduler looks again)."""

    def handlers(self) -> dict[str, CommandHandler]:
        return {
            "every": self.every, "at": self.at, "cron": self.cron, "tz": self.tz,
            "jobs": self.jobs,
        }  # fmt: skip

    # making jobs ------------------------------------------------------------
    async def every(self, event: InboundEvent, key: str, args: str) -> Reply:
        interval, _, prompt = args.partition(" ")
        return await self.make(_creator(event, key), "every", interval, prompt)

    async def at(self, event: InboundEvent, key: str, args: str) -> Reply:
        words = args.split()
        cut = 2 if len(words) >= 2 and "-" in words[0] else 1
        when, prompt = " ".join(words[:cut]), " ".join(words[cut:])
        return await self.make(_creator(event, key), "at", when, prompt)

    async def cron(self, event: InboundEvent, key: str, args: str) -> Reply:
        try:
            expression, *rest = shlex.split(args)
        except ValueError as exc:
            return f'⚠️ {exc}. Usage: /cron "0 9 * * 1" <prompt>'
        return await self.make(_creator(event, key), "cron", expression, " ".join(rest))

    async def tz(self, event: InboundEvent, key: str, args: str) -> Reply:
        person = _person(event)
        if not args:
            return f"🕘 Your time zone: {await self._zone_of(person)}"
        try:
            zone(args.strip())
        except ScheduleError as exc:
            return f"⚠️ {exc}"
        await self.book.set_timezone(person, args.strip())
        return f"🕘 Your time zone is now {args.strip()}."

    async def from_tool(self, request: ScheduleRequest, ctx: ToolContext) -> str:
        """The ``schedule`` tool's job, in the context's chat for its speaker."""
        if ctx.requested_by is None:
            return "Nobody to schedule for in this session."
        platform, _, user_id = ctx.requested_by.partition(":")
        chat_key = ctx.session_key.partition(CHILD_MARK)[0]
        key = parse_session_key(chat_key)
        chat = ChatRef(key.platform, key.chat_id, key.thread_id)
        creator = Creator(platform, user_id, chat, chat_key)
        return await self.make(creator, request.kind, request.when, request.prompt)

    async def make(self, creator: Creator, kind: Kind, when: str, prompt: str) -> str:
        """Make a job from its schedule's text; what was made, or why not."""
        prompt = prompt.strip()
        if not prompt:
            return "⚠️ What should I do then? Add the prompt after the time."
        tz = await self._zone_of(creator.person)
        try:
            spec = self._spec(kind, when, tz)
        except ScheduleError as exc:
            return f"⚠️ {exc}. {USAGE[kind]}"
        if await self.book.count_of(creator.person) >= self.config.max_jobs_per_person:
            return f"⚠️ You have {self.config.max_jobs_per_person} jobs already (/jobs)."
        now = self.clock()
        job = Job(
            id=uuid.uuid4().hex[:8], person=creator.person, creator_user_id=creator.user_id,
            platform=creator.chat.platform, chat_id=creator.chat.chat_id,
            thread_id=creator.chat.thread_id, session_key=creator.key, prompt=prompt,
            kind=kind, spec=spec, timezone=tz, profile=self.profile, model=None,
            state="active", state_reason=None, next_at=Schedule(kind, spec, tz).first(now),
            created_at=now,
        )  # fmt: skip
        await self.book.add(job)
        self.changed()
        return f"⏰ Job {job.id}: {describe(job)}; next {next_run(job)}."

    def _spec(self, kind: Kind, when: str, tz: str) -> str:
        """The stored spec of ``when`` (``ScheduleError`` when it cannot be used)."""
        if kind == "cron":
            return check_cron(when)
        if kind == "at":
            if when.strip()[-1:].isalpha():  # a delay: "10m", "2h"
                return repr(self.clock() + parse_interval(when))
            return repr(parse_at(when, tz, self.clock()))
        seconds = parse_interval(when)
        if seconds < self.config.min_interval_seconds:
            raise ScheduleError(f"the shortest interval is {self.config.min_interval_seconds} s")
        return str(seconds)

    # /jobs ------------------------------------------------------------------
    async def jobs(self, event: InboundEvent, key: str, args: str) -> Reply:
        words = args.split()
        if not words:
            return await self._list(event)
        if len(words) != 2 or words[0] not in ACTIONS:
            return "Usage: /jobs, or /jobs pause|resume|delete|run ID"
        action, job_id = words
        job = await self.book.job(job_id)
        if job is None or not self._may_change(event, key, job):
            return f"⚠️ No job {job_id} of yours."
        return await self._act(action, job)

    async def _list(self, event: InboundEvent) -> Reply:
        mine = [j for j in await self.book.jobs(_person(event)) if j.state != "ended"]
        if not mine:
            return "No jobs. Make one with /every, /at or /cron."
        lines = []
        for job in mine:
            runs = await self.book.runs_of(job.id, limit=1)
            last = f"; last: {outcome(runs[0])}" if runs else ""
            state = f" [{job.state_reason or job.state}]" if job.state != "active" else ""
            lines.append(f"• {job.id} {describe(job)}; next {next_run(job)}{last}{state}")
        return "\n".join(lines)

    async def _act(self, action: str, job: Job) -> Reply:
        if action == "pause":
            await self.book.set_state(job.id, "paused", "paused")
            return f"⏸ Job {job.id} paused."
        if action == "resume":
            next_at = Schedule(job.kind, job.spec, job.timezone).after(self.clock())
            if job.kind == "at":
                next_at = float(job.spec)
            await self.book.reschedule(job.id, next_at)
            self.changed()
            return f"▶️ Job {job.id} resumed."
        if action == "delete":
            await self.book.delete(job.id)
            return f"🗑 Job {job.id} deleted."
        if self.run_now is None or await self.run_now(job) is None:
            return f"⚠️ Job {job.id} could not run now."
        return f"▶️ Job {job.id} runs now."

    def _may_change(self, event: InboundEvent, key: str, job: Job) -> bool:
        """Only the creator, or an approver of the chat's session."""
        me = _person(event)
        return me == job.person or me in self.approvers(key)

    async def _zone_of(self, person: str) -> str:
        return await self.book.timezone_of(person) or self.config.timezone


def _person(event: InboundEvent) -> str:
    return qualified(event.platform, event.sender.id)


def _creator(event: InboundEvent, key: str) -> Creator:
    return Creator(event.platform, event.sender.id, event.chat, key)


@dataclass(frozen=True, slots=True)
class Creator:
    """Who makes a job and the chat (with its session key) it answers in."""

    platform: str
    user_id: str
    chat: ChatRef
    key: str

    @property
    def person(self) -> str:
        return qualified(self.platform, self.user_id)


def describe(job: Job) -> str:
    """``every 3600 s: water the plants`` — what and when, for a list."""
    if job.kind == "every":
        when = f"every {int(float(job.spec))} s"
    elif job.kind == "cron":
        when = f'cron "{job.spec}" ({job.timezone})'
    else:
        when = f"at {wall_clock(float(job.spec), job.timezone, with_date=True)} ({job.timezone})"
    return f"{when}: {job.prompt}"


def next_run(job: Job) -> str:
    if job.next_at is None or job.state != "active":
        return "—"
    return wall_clock(job.next_at, job.timezone, with_date=True)


def outcome(run: JobRun) -> str:
    delivery = f", delivery {run.delivery}" if run.delivery else ""
    reason = f" ({run.delivery_reason})" if run.delivery == "failed" and run.delivery_reason else ""
    return f"{run.status}{delivery}{reason}"
