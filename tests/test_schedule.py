"""The scheduler on a test clock (core/schedule): each occurrence claimed and run once, also
with two schedulers on one PostgreSQL; a run whose process died is marked, not run again;
occurrences missed while down → one catch-up with the note (none with ``skip``); DST in
Europe/Berlin; undeliverable answers pause the job."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from core.schedule.scheduler import RunOutcome, Scheduler, SchedulerConfig
from core.schedule.times import Schedule, ScheduleError, parse_at, parse_interval
from core.store.base import Store
from core.store.jobs import Job, JobBook, JobRun, job_book
from core.store.postgres import PgStore, open_pg_store

BERLIN = ZoneInfo("Europe/Berlin")
START = datetime(2027, 1, 15, 8, 0, tzinfo=BERLIN).timestamp()


class Clock:
    def __init__(self, now: float = START) -> None:
        self.now_s = now

    def now(self) -> float:
        return self.now_s

    async def sleep(self, seconds: float) -> None:
        await asyncio.Event().wait()  # ticks are driven by the test


SENT = RunOutcome("succeeded", "sent")


class Runner:
    """Records each run; ``hold`` keeps runs going until set; ``outcome`` is returned."""

    def __init__(self, outcome: RunOutcome = SENT) -> None:
        self.runs: list[tuple[str, float, str | None]] = []
        self.outcome = outcome
        self.hold: asyncio.Event | None = None

    async def __call__(self, job: Job, run: JobRun) -> RunOutcome:
        self.runs.append((job.id, run.scheduled_at, run.note))
        if self.hold is not None:
            await self.hold.wait()
        return self.outcome


def every_job(job_id: str, first: float, seconds: int = 3600) -> Job:
    return Job(
        id=job_id, person="alice", creator_user_id="7", platform="telegram", chat_id="7",
        thread_id=None, session_key="telegram:dm:7", prompt="stretch", kind="every",
        spec=str(seconds), timezone="Europe/Berlin", profile="default", model=None,
        state="active", state_reason=None, next_at=first, created_at=START,
    )  # fmt: skip


def scheduler(
    book: JobBook, runner: Runner, clock: Clock, owner: str = "p1", **config: object
) -> Scheduler:
    return Scheduler(
        book, runner, owner=owner, clock=clock.now, sleep=clock.sleep,
        config=SchedulerConfig(**config),  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.fixture
def store(any_store: Store) -> Store:
    return any_store


def test_the_schedule_arithmetic_reads_intervals_times_and_cron() -> None:
    assert parse_interval("1h30m") == 5400
    with pytest.raises(ScheduleError):
        parse_interval("soon")
    assert parse_at("09:00", "Europe/Berlin", START) == START + 3600
    assert parse_at("07:00", "Europe/Berlin", START) == START + 23 * 3600  # tomorrow
    with pytest.raises(ScheduleError):
        parse_at("2020-01-01 09:00", "Europe/Berlin", START)
    monday_nine = Schedule("cron", "0 9 * * 1", "Europe/Berlin").after(START)  # a Friday
    assert datetime.fromtimestamp(monday_nine, BERLIN) == datetime(2027, 1, 18, 9, tzinfo=BERLIN)


@pytest.mark.parametrize("day", [(2027, 3, 27), (2027, 10, 30)])
def test_a_daily_0230_job_in_berlin_runs_once_on_the_dst_change_day(day: tuple[int, ...]) -> None:
    schedule = Schedule("cron", "30 2 * * *", "Europe/Berlin")
    before = datetime(*day, 12, 0, tzinfo=BERLIN).timestamp()  # noon, the day before
    times = [schedule.after(before)]
    for _ in range(2):
        times.append(schedule.after(times[-1]))
    dates = [datetime.fromtimestamp(t, BERLIN).date() for t in times]
    assert len(set(dates)) == 3  # one a day: the change day once, then the next
    hours = [datetime.fromtimestamp(t, BERLIN).hour for t in times]
    spring = day[1] == 3
    assert hours == [3 if spring else 2, 2, 2]  # spring: no 02:30 that day, so 03:30 CEST


async def test_each_occurrence_runs_once_on_time(store: Store) -> None:
    book, clock, runner = job_book(store), Clock(), Runner()
    await book.add(every_job("j1", START + 3600))
    engine = scheduler(book, runner, clock)
    assert await engine.tick() == []
    for hour in (1, 2, 3):
        clock.now_s = START + hour * 3600 + 5
        await engine.tick()
        await engine.tick()  # nothing more for the same occurrence
        await engine.drain()
    assert [at for _, at, _ in runner.runs] == [START + h * 3600 for h in (1, 2, 3)]
    assert all(note is None for _, _, note in runner.runs)
    runs = await book.runs_of("j1")
    assert {(r.status, r.delivery) for r in runs} == {("succeeded", "sent")}


async def test_a_run_whose_process_died_is_marked_interrupted_not_run_again(store: Store) -> None:
    book, clock = job_book(store), Clock()
    await book.add(every_job("j1", START + 3600))
    dying = Runner()
    dying.hold = asyncio.Event()  # never set: the process dies mid-run
    first = scheduler(book, dying, clock, owner="dead", lease_seconds=60.0)
    clock.now_s = START + 3600
    await first.tick()
    await asyncio.sleep(0)
    await first.aclose()  # killed: nothing recorded after the claim
    survivor, runner = None, Runner()
    survivor = scheduler(book, runner, clock, owner="alive", lease_seconds=60.0)
    clock.now_s = START + 3600 + 30  # the lease still holds: left alone
    await survivor.tick()
    assert (await book.runs_of("j1"))[0].status == "running"
    clock.now_s = START + 3600 + 61
    await survivor.tick()
    await survivor.drain()
    (run,) = await book.runs_of("j1")
    assert run.status == "interrupted" and run.owner == "dead"
    assert runner.runs == []  # the occurrence was not run a second time


@pytest.mark.parametrize("missed", ["run_once", "skip"])
async def test_down_across_three_occurrences_one_catch_up_or_none(
    store: Store, missed: str
) -> None:
    book, clock, runner = job_book(store), Clock(), Runner()
    await book.add(every_job("j1", START + 3600))  # 09:00, 10:00, 11:00 missed
    clock.now_s = START + 3 * 3600 + 600  # up again at 11:10
    engine = scheduler(book, runner, clock, missed=missed)
    await engine.tick()
    await engine.tick()
    await engine.drain()
    (run,) = await book.runs_of("j1")
    assert run.note == "(missed 3 times from 09:00 while the gateway was down)"
    assert run.scheduled_at == START + 3 * 3600
    if missed == "run_once":
        assert runner.runs == [("j1", START + 3 * 3600, run.note)]
        assert run.status == "succeeded"
    else:
        assert runner.runs == [] and run.status == "missed"
    job = await book.job("j1")
    assert job is not None and job.next_at == START + 4 * 3600  # 12:00, on time again


async def test_a_one_shot_missed_once_says_the_time(store: Store) -> None:
    book, clock, runner = job_book(store), Clock(), Runner()
    job = every_job("j1", START + 3600)
    await book.add(Job(**{**_fields(job), "kind": "at", "spec": str(START + 3600)}))
    clock.now_s = START + 5 * 3600
    engine = scheduler(book, runner, clock)
    await engine.tick()
    await engine.drain()
    assert runner.runs == [("j1", START + 3600, "(missed at 09:00 while the gateway was down)")]
    ended = await book.job("j1")
    assert ended is not None and ended.state == "ended"


async def test_undeliverable_answers_pause_the_job_after_the_count(store: Store) -> None:
    book, clock = job_book(store), Clock()
    refused = RunOutcome("succeeded", "failed", "Forbidden: bot was blocked by the user")
    runner = Runner(refused)
    await book.add(every_job("j1", START + 3600))
    engine = scheduler(book, runner, clock, pause_after_failed_deliveries=2)
    for hour in (1, 2, 3):
        clock.now_s = START + hour * 3600
        await engine.tick()
        await engine.drain()
    assert len(runner.runs) == 2  # paused after the second
    job = await book.job("j1")
    assert job is not None and job.state == "paused"
    assert "Forbidden: bot was blocked by the user" in (job.state_reason or "")
    runs = await book.runs_of("j1")
    assert {(r.status, r.delivery, r.delivery_reason) for r in runs} == {
        ("succeeded", "failed", "Forbidden: bot was blocked by the user")
    }


async def test_two_schedulers_on_one_postgres_run_each_occurrence_once(pg_store: PgStore) -> None:
    book, clock = job_book(pg_store), Clock()
    jobs, occurrences = 10, 10  # exact-once needs both to see each due job, not 50 x 20
    for n in range(jobs):
        await book.add(every_job(f"j{n}", START + 60, seconds=60))
    other = await open_pg_store(pg_store.dsn, process_id="other/00000001", pool_size=2)
    runners = [Runner(RunOutcome("succeeded")), Runner(RunOutcome("succeeded"))]
    books = [book, job_book(other)]  # as two processes: each its own pool of connections
    engines = [
        scheduler(b, r, clock, owner=f"p{i}")
        for i, (b, r) in enumerate(zip(books, runners, strict=True))
    ]
    try:
        for minute in range(1, occurrences + 1):
            clock.now_s = START + minute * 60
            await asyncio.gather(*(engine.tick() for engine in engines))
            await asyncio.gather(*(engine.drain() for engine in engines))
    finally:
        await other.close()
    ran = Counter((job_id, at) for r in runners for job_id, at, _ in r.runs)
    assert len(ran) == jobs * occurrences and set(ran.values()) == {1}
    assert all(r.runs for r in runners)  # both took part
    counts = await book.run_counts()
    assert counts == {"succeeded": jobs * occurrences}


def _fields(job: Job) -> dict[str, object]:
    return {name: getattr(job, name) for name in job.__slots__}  # type: ignore[attr-defined]
