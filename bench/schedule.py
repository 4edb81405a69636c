"""``python -m bench schedule``: the scheduler of scheduled turns (core/schedule) on a
SQLite store holding 10,000 active jobs — the CPU an idle minute costs (12 ticks at the
5 s poll, nothing due), and the lag between due and started when 500 fall due in the same
minute (p50/p99, measured as each run starts)."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from bench.sizes import Sizes
from core.schedule.scheduler import RunOutcome, Scheduler
from core.store.jobs import Job, JobRun, job_book
from core.store.sqlite import open_store

JOBS, FIRING = 10_000, 500


def _job(n: int, next_at: float) -> Job:
    return Job(
        id=f"j{n}", person=f"p{n % 100}", creator_user_id="1", platform="telegram",
        chat_id="1", thread_id=None, session_key="telegram:dm:1", prompt="ping", kind="every",
        spec="86400", timezone="UTC", profile="default", model=None, state="active",
        state_reason=None, next_at=next_at, created_at=0.0,
    )  # fmt: skip


async def run(sizes: Sizes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(Path(tmp) / "state.db")
        book = job_book(store)
        now = time.time()
        for n in range(JOBS):  # FIRING of them due at `now + 30`, the rest tomorrow
            await book.add(_job(n, now + 30 if n < FIRING else now + 86400 + n))
        lags: list[float] = []

        async def runner(job: Job, run: JobRun) -> RunOutcome:
            lags.append(time.time() - run.scheduled_at)
            return RunOutcome("succeeded")

        async def never(seconds: float) -> None:
            raise AssertionError

        clock = [now]
        engine = Scheduler(book, runner, owner="bench", clock=lambda: clock[0], sleep=never)
        cpu = time.process_time()
        for _ in range(12):
            await engine.tick()
            await book.next_due_at()
        idle_ms = (time.process_time() - cpu) * 1000
        due = now + 30
        clock[0] = due  # 500 due at once: lag from their due time on the real clock
        offset = time.time() - due
        started = time.time()
        await engine.tick()
        await engine.drain()
        took = time.time() - started
        lags = [lag - offset for lag in lags]
        await store.close()
    quantiles = statistics.quantiles(lags, n=100)
    print(f"scheduler, {JOBS} active jobs (SQLite)")
    print(f"  idle minute (12 ticks, nothing due): {idle_ms:.1f} ms CPU")
    print(f"  {len(lags)} due in one minute: lag p50 {quantiles[49] * 1000:.1f} ms, "
          f"p99 {quantiles[98] * 1000:.1f} ms; all started in {took * 1000:.0f} ms")  # fmt: skip
