"""The chat commands of scheduled turns (gateway/control/schedule.py) on a real store and
a test clock: /every, /at, /cron make jobs in the chat they were said in, /tz, /jobs lists
them, pause/resume/delete/run, and a stranger cannot touch another's job; a job made by
/every then runs through the scheduler."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from core.schedule.scheduler import RunOutcome, Scheduler
from core.store.base import Store
from core.store.jobs import Job, JobRun, job_book
from gateway.config.schedule import ScheduleSection
from gateway.control.schedule import ScheduleCommands
from tests.gateway.fakes import Person, event

ALICE, MALLORY, ADMIN = Person("1", "Alice"), Person("2", "Mallory"), Person("9", "Admin")
BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2027, 1, 15, 8, 0, tzinfo=BERLIN).timestamp()


@pytest.fixture
def store(any_store: Store) -> Store:
    return any_store


def commands(store: Store, **config: object) -> ScheduleCommands:
    return ScheduleCommands(
        job_book(store), ScheduleSection(enabled=True, **config),  # type: ignore[arg-type]
        approvers=lambda key: {"fake:9"}, clock=lambda: NOW,
    )  # fmt: skip


async def say(cmds: ScheduleCommands, who: Person, text: str, chat_id: str = "100") -> str:
    inbound = event(who, text, chat_id=chat_id)
    handler = cmds.handlers()[inbound.command or ""]
    reply = await handler(inbound, str(inbound.session_key), inbound.args.strip())
    assert isinstance(reply, str)
    return reply


async def test_every_at_and_cron_make_jobs_in_the_chat_they_were_said_in(store: Store) -> None:
    cmds = commands(store)
    assert "Europe/Berlin" in await say(cmds, ALICE, "/tz Europe/Berlin")
    assert "next 2027-01-15 09:00" in await say(cmds, ALICE, "/every 1h stretch")
    assert "next 2027-01-15 09:30" in await say(cmds, ALICE, "/at 09:30 call mum")
    assert "next 2027-01-20 09:00" in await say(cmds, ALICE, "/at 2027-01-20 09:00 dentist")
    assert "next 2027-01-18 09:00" in await say(cmds, ALICE, '/cron "0 9 * * 1" PR summary')
    jobs = await job_book(store).jobs("fake:1")
    assert sorted((j.kind, j.prompt) for j in jobs) == [
        ("at", "call mum"), ("at", "dentist"), ("cron", "PR summary"), ("every", "stretch"),
    ]  # fmt: skip
    assert {(j.platform, j.chat_id, j.session_key, j.timezone) for j in jobs} == {
        ("fake", "100", "fake:dm:100", "Europe/Berlin")
    }
    listed = await say(cmds, ALICE, "/jobs")
    assert all(j.id in listed for j in jobs)
    assert await say(cmds, MALLORY, "/jobs") == "No jobs. Make one with /every, /at or /cron."


async def test_bad_input_and_limits_are_refused_plainly(store: Store) -> None:
    cmds = commands(store, max_jobs_per_person=1)
    assert "shortest interval is 60 s" in await say(cmds, ALICE, "/every 10s spam")
    assert "not an interval" in await say(cmds, ALICE, "/every often spam")
    assert "unknown time zone" in await say(cmds, ALICE, "/tz Mars/Olympus")
    assert "not a five-field cron" in await say(cmds, ALICE, '/cron "0 9 *" x')
    assert "already passed" in await say(cmds, ALICE, "/at 2020-01-01 09:00 x")
    await say(cmds, ALICE, "/every 1h stretch")
    assert "1 jobs already" in await say(cmds, ALICE, "/every 2h more")


async def test_only_the_creator_or_an_approver_changes_a_job(store: Store) -> None:
    ran: list[str] = []

    async def run_now(job: Job) -> JobRun | None:
        ran.append(job.id)
        return JobRun("r", job.id, NOW, "running", "p", NOW + 60, NOW)

    cmds = commands(store)
    cmds.run_now = run_now
    await say(cmds, ALICE, "/every 1h stretch")
    (job,) = await job_book(store).jobs("fake:1")
    for action in ("pause", "resume", "delete", "run"):
        assert (
            await say(cmds, MALLORY, f"/jobs {action} {job.id}") == f"⚠️ No job {job.id} of yours."
        )
    assert "paused" in await say(cmds, ALICE, f"/jobs pause {job.id}")
    assert "[paused]" in await say(cmds, ALICE, "/jobs")
    assert "resumed" in await say(cmds, ADMIN, f"/jobs resume {job.id}")  # an approver
    assert "runs now" in await say(cmds, ALICE, f"/jobs run {job.id}")
    assert ran == [job.id]
    assert "deleted" in await say(cmds, ALICE, f"/jobs delete {job.id}")
    assert await job_book(store).jobs() == []


async def test_a_job_made_with_every_runs_and_jobs_shows_its_outcome(store: Store) -> None:
    now = [NOW]
    cmds = commands(store)
    cmds.clock = lambda: now[0]
    await say(cmds, ALICE, "/every 1h stretch")
    seen: list[tuple[str, str]] = []

    async def runner(job: Job, run: JobRun) -> RunOutcome:
        seen.append((job.session_key, job.prompt))
        return RunOutcome("succeeded", "sent")

    async def never(seconds: float) -> None:
        raise AssertionError("the test drives the ticks")

    engine = Scheduler(job_book(store), runner, owner="p", clock=lambda: now[0], sleep=never)
    now[0] = NOW + 3600
    await engine.tick()
    await engine.drain()
    assert seen == [("fake:dm:100", "stretch")]
    assert "last: succeeded, delivery sent" in await say(cmds, ALICE, "/jobs")
