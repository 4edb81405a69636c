"""Scheduled turns in the store (SQLite migration 11, PostgreSQL 4; core/store/jobs.py):
jobs, claimed occurrences (once per job and scheduled time), leases taken over as
``interrupted``, delivery kept apart, time zones. Each test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from core.store.base import Store
from core.store.jobs import Job, JobBook, JobRun, job_book
from tests.support.store_backends import reopen


@pytest.fixture
def store(any_store: Store) -> Store:
    return any_store


def book_of(store: Store) -> JobBook:
    return job_book(store)


def job(job_id: str = "j1", next_at: float | None = 1000.0, person: str = "alice") -> Job:
    return Job(
        id=job_id, person=person, creator_user_id="7", platform="telegram", chat_id="7",
        thread_id=None, session_key="telegram:dm:7", prompt="water the plants", kind="every",
        spec="3600", timezone="Europe/Berlin", profile="default", model=None, state="active",
        state_reason=None, next_at=next_at, created_at=1.0,
    )  # fmt: skip


def run(run_id: str, at: float, owner: str = "p1", lease: float = 2000.0) -> JobRun:
    return JobRun(run_id, "j1", at, "running", owner, lease, started_at=at)


async def test_a_job_is_kept_listed_due_and_deleted(store: Store) -> None:
    book = book_of(store)
    await book.add(job())
    await book.add(job("j2", next_at=5000.0, person="bob"))
    assert await book.job("j1") == job()
    assert [j.id for j in await book.jobs()] == ["j1", "j2"]
    assert [j.id for j in await book.jobs("bob")] == ["j2"]
    assert await book.count_of("alice") == 1
    assert [j.id for j in await book.due(1000.0)] == ["j1"]
    assert await book.next_due_at() == 1000.0
    assert await book.set_state("j1", "paused", "by alice")
    assert await book.due(9999.0) == [await book.job("j2")]
    assert await book.delete("j2")
    assert not await book.delete("j2")
    assert await book.next_due_at() is None


async def test_an_occurrence_is_claimed_once_and_the_job_advanced_once(store: Store) -> None:
    book = book_of(store)
    await book.add(job())
    assert await book.claim(run("r1", 1000.0))
    assert not await book.claim(run("r2", 1000.0, owner="p2"))  # another process lost
    current = await book.job("j1")
    assert current is not None
    assert await book.advance(current, 4600.0)
    assert not await book.advance(current, 4600.0)  # already moved past that occurrence
    assert [r.id for r in await book.runs_of("j1")] == ["r1"]
    later = await book.job("j1")
    assert later is not None and later.next_at == 4600.0
    assert await book.advance(later, None)
    ended = await book.job("j1")
    assert ended is not None and ended.state == "ended"


async def test_an_expired_lease_marks_the_run_interrupted_and_it_stays_claimed(
    store: Store,
) -> None:
    book = book_of(store)
    await book.add(job())
    await book.claim(run("r1", 1000.0, owner="dead", lease=1500.0))
    await book.claim(run("r2", 2000.0, owner="live", lease=1500.0))
    assert await book.renew("live", 3000.0) == 1
    assert [r.id for r in await book.interrupt_expired(1600.0)] == ["r1"]
    assert await book.interrupt_expired(1600.0) == []
    store = await reopen(store)
    book = book_of(store)
    marked = await book.run("r1")
    assert marked is not None and marked.status == "interrupted" and marked.finished_at == 1600.0
    assert not await book.claim(run("r3", 1000.0))  # never run again
    assert not await book.finish("r1", "succeeded", 1700.0)  # the dead process is too late
    await store.close()


async def test_run_and_delivery_statuses_are_kept_apart(store: Store) -> None:
    book = book_of(store)
    await book.add(job())
    await book.claim(run("r1", 1000.0))
    assert await book.finish("r1", "succeeded", 1010.0)
    await book.set_delivery("r1", "failed", "Forbidden: bot was blocked by the user")
    finished = await book.run("r1")
    assert finished is not None
    assert (finished.status, finished.delivery) == ("succeeded", "failed")
    assert finished.delivery_reason == "Forbidden: bot was blocked by the user"
    assert await book.run_counts() == {"succeeded": 1}
    assert await book.delivery_counts() == {"failed": 1}
    assert await book.delivery_failed("j1") == 1
    assert await book.delivery_failed("j1") == 2
    await book.delivery_sent("j1")
    assert (await book.job("j1")).delivery_failures == 0  # type: ignore[union-attr]


async def test_a_persons_time_zone_is_kept_and_replaced(store: Store) -> None:
    book = book_of(store)
    assert await book.timezone_of("alice") is None
    await book.set_timezone("alice", "Europe/Berlin")
    await book.set_timezone("alice", "America/New_York")
    assert await book.timezone_of("alice") == "America/New_York"
