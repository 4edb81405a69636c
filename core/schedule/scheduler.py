"""The scheduler: claims each due occurrence once and starts its run (docs/architecture.md,
"Scheduled turns").

Each :meth:`Scheduler.tick` (on the injected clock):

1. marks ``interrupted`` the runs whose lease expired (their process died: they are never
   run again, :meth:`core.store.jobs.JobBook.interrupt_expired`);
2. for each active job whose next occurrence is due, claims that occurrence (the run's row,
   unique per job and scheduled time: a second scheduler, here or in another process,
   claims nothing) and moves the job past it (compare-and-set on ``next_at``);
3. an occurrence more than :data:`GRACE` late fell while no scheduler ran: with
   ``missed = "run_once"`` only the latest one due is run, once, with a note naming the
   first missed time; with ``"skip"`` it is recorded ``missed`` and nothing runs. Never a
   burst of catch-ups.

Runs go to the injected :class:`JobRunner` in tasks of their own; while they run their
leases are renewed. A run's outcome and its delivery are recorded apart; a job whose
answers could not be delivered ``pause_after_failed_deliveries`` times in a row is paused.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from core.schedule.times import Schedule, wall_clock
from core.store.jobs import DeliveryStatus, Job, JobBook, JobRun, RunStatus

log = logging.getLogger(__name__)

GRACE = 120.0
"""Seconds an occurrence may be late and still count as on time (not missed)."""

Missed = Literal["run_once", "skip"]
Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


class SchedulerFigures:
    """The runs this scheduler ended by status, their deliveries by status, and the lag
    between each run's scheduled time and its start (count, sum, the latest ones)."""

    def __init__(self, recent: int = 1000) -> None:
        self.runs: Counter[str] = Counter()
        self.deliveries: Counter[str] = Counter()
        self.starts = 0
        self.lag_sum = 0.0
        self.recent_lags: deque[float] = deque(maxlen=recent)

    def started(self, lag: float) -> None:
        self.starts += 1
        self.lag_sum += lag
        self.recent_lags.append(lag)


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a run ended, and what became of its answer's delivery."""

    status: RunStatus
    delivery: DeliveryStatus | None = None
    reason: str | None = None
    """The platform's reason when the delivery failed; the error when the run failed."""


class JobRunner(Protocol):
    """Runs one claimed occurrence (the gateway's turn and delivery)."""

    async def __call__(self, job: Job, run: JobRun) -> RunOutcome: ...


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    missed: Missed = "run_once"
    lease_seconds: float = 60.0
    poll_seconds: float = 5.0
    """The longest wait between ticks (other processes may have added jobs meanwhile)."""
    pause_after_failed_deliveries: int = 3
    batch: int = 500


def missed_note(job: Job, first: float, count: int) -> str:
    """``(missed at 09:00 while the gateway was down)``, in the job's time zone."""
    at = wall_clock(first, job.timezone)
    if count == 1:
        return f"(missed at {at} while the gateway was down)"
    return f"(missed {count} times from {at} while the gateway was down)"


class Scheduler:
    """Claims due occurrences in the store and runs them through ``runner``."""

    def __init__(
        self, book: JobBook, runner: JobRunner, *, owner: str, clock: Clock, sleep: Sleep,
        config: SchedulerConfig = SchedulerConfig(),
    ) -> None:  # fmt: skip
        self._book, self._runner, self._owner = book, runner, owner
        self._clock, self._sleep, self._config = clock, sleep, config
        self._running: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self.figures = SchedulerFigures()
        """What ran here and how (``/metrics``)."""

    @property
    def running(self) -> int:
        return len(self._running)

    def wake(self) -> None:
        """A job was added or changed: look again now."""
        self._wake.set()

    async def tick(self) -> list[JobRun]:
        """One pass: interrupt dead runs, claim and start every due occurrence; the runs
        this pass started."""
        now = self._clock()
        for dead in await self._book.interrupt_expired(now):
            log.warning("scheduled run %s of job %s interrupted: its process stopped",
                        dead.id, dead.job_id)  # fmt: skip
        started = []
        for job in await self._book.due(now, self._config.batch):
            run = await self._claim(job, now)
            if run is not None and run.status == "running":
                self._start(job, run)
                started.append(run)
        return started

    async def run_now(self, job: Job) -> JobRun | None:
        """Run ``job`` once now, outside its schedule (``/jobs run``)."""
        now = self._clock()
        run = self._new_run(job, now, now, None)
        if not await self._book.claim(run):
            return None
        self._start(job, run)
        return run

    async def serve(self) -> None:
        """Tick until cancelled, sleeping until the next occurrence (at most ``poll_seconds``)."""
        lease_renewal = asyncio.create_task(self._renew_leases())
        try:
            while True:
                await self.tick()
                await self._until_next()
        finally:
            lease_renewal.cancel()

    async def drain(self) -> None:
        """Wait for the runs started so far to end."""
        while self._running:
            await asyncio.gather(*list(self._running.values()), return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel the runs still going (their leases lapse; another process marks them)."""
        for task in list(self._running.values()):
            task.cancel()
        await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def _until_next(self) -> None:
        due = await self._book.next_due_at()
        wait = self._config.poll_seconds
        if due is not None:
            wait = max(0.0, min(wait, due - self._clock()))
        self._wake.clear()
        sleeper = asyncio.ensure_future(self._sleep(wait))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waker.cancel()

    async def _renew_leases(self) -> None:
        while True:
            await self._sleep(self._config.lease_seconds / 3)
            if self._running:
                await self._book.renew(self._owner, self._clock() + self._config.lease_seconds)

    async def _claim(self, job: Job, now: float) -> JobRun | None:
        """Claim the job's due occurrence (or its catch-up) and move the job past it."""
        assert job.next_at is not None
        schedule = Schedule(job.kind, job.spec, job.timezone)
        due, note = job.next_at, None
        status: RunStatus = "running"
        if now - due > GRACE:
            due, count = schedule.latest_until(job.next_at, now)
            note = missed_note(job, job.next_at, count)
            if self._config.missed == "skip":
                status = "missed"
        run = self._new_run(job, due, now, note, status)
        claimed = await self._book.claim(run)
        following = schedule.after(due)
        await self._book.advance(job, None if following == float("inf") else following)
        if not claimed:
            return None
        if status == "missed":
            log.info("job %s: %s, skipped", job.id, note)
        return run

    def _new_run(
        self, job: Job, due: float, now: float, note: str | None, status: RunStatus = "running"
    ) -> JobRun:
        return JobRun(
            id=uuid.uuid4().hex, job_id=job.id, scheduled_at=due, status=status,
            owner=self._owner, lease_until=now + self._config.lease_seconds, started_at=now,
            finished_at=now if status != "running" else None, note=note,
        )  # fmt: skip

    def _start(self, job: Job, run: JobRun) -> None:
        self.figures.started(max(0.0, run.started_at - run.scheduled_at))
        task = asyncio.create_task(self._run(job, run), name=f"job {job.id}")
        self._running[run.id] = task
        task.add_done_callback(lambda _: self._running.pop(run.id, None))

    async def _run(self, job: Job, run: JobRun) -> None:
        try:
            outcome = await self._runner(job, run)
        except asyncio.CancelledError:
            raise  # shutdown: the lease lapses and the run is marked interrupted
        except Exception as exc:
            log.exception("scheduled run %s of job %s failed", run.id, job.id)
            outcome = RunOutcome("failed", reason=str(exc) or type(exc).__name__)
        error = outcome.reason if outcome.status == "failed" else None
        await self._book.finish(run.id, outcome.status, self._clock(), error)
        self.figures.runs[outcome.status] += 1
        if outcome.delivery is not None:
            self.figures.deliveries[outcome.delivery] += 1
        await self._delivered(job, run, outcome)

    async def _delivered(self, job: Job, run: JobRun, outcome: RunOutcome) -> None:
        if outcome.delivery is None:
            return
        await self._book.set_delivery(run.id, outcome.delivery, outcome.reason)
        if outcome.delivery == "sent":
            await self._book.delivery_sent(job.id)
            return
        if outcome.delivery != "failed":
            return
        failures = await self._book.delivery_failed(job.id)
        limit = self._config.pause_after_failed_deliveries
        if failures >= limit:
            reason = f"paused: {failures} answers in a row undeliverable ({outcome.reason})"
            await self._book.set_state(job.id, "paused", reason)
            log.warning("job %s %s", job.id, reason)
