"""Scheduled turns in the store (SQLite migration 11, PostgreSQL 4): ``jobs``, their
occurrences' runs (``job_runs``) and each person's time zone (``person_timezones``).

**Exactly once.** An occurrence is claimed by inserting its run row: ``job_runs`` is unique
on ``(job_id, scheduled_at)``, so the claim and the run's record are one statement, one
transaction; a second claimant (another process, or this one after a restart) inserts
nothing and learns it lost. A running run holds a lease (``owner``, ``lease_until``) that
its process renews; once a lease has expired (the process died) :meth:`JobBook.interrupt_expired`
marks the run ``interrupted`` — never runs it again.

A run's own status (:data:`RUN_STATUSES`) is kept apart from its delivery's
(:data:`DELIVERY_STATUSES`, with the platform's reason when it failed).

:class:`JobBook` builds the statements (:mod:`core.store.statements`) and runs them
through a :class:`StatementRunner` — :class:`core.store.sqlite.SqliteStore` and
:class:`core.store.postgres.PgStore` both are one — so the big ``Store`` protocol does not
grow and both backends run the same SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Literal, Protocol, runtime_checkable

from core.store.statements import Row, Statement, insert_sql

JobKind = Literal["at", "every", "cron"]
JobState = Literal["active", "paused", "ended"]
RunStatus = Literal["running", "succeeded", "failed", "stopped", "interrupted", "missed"]
DeliveryStatus = Literal["queued", "sent", "failed"]

RUN_STATUSES: tuple[RunStatus, ...] = (
    "running", "succeeded", "failed", "stopped", "interrupted", "missed",
)  # fmt: skip
DELIVERY_STATUSES: tuple[DeliveryStatus, ...] = ("queued", "sent", "failed")


@runtime_checkable
class StatementRunner(Protocol):
    """What :class:`JobBook` needs of a store: run one committed statement, read rows."""

    async def run_statement(self, statement: Statement) -> int:
        """Run one writing statement as its own committed transaction; its row count."""
        ...

    async def read_rows(self, sql: str, params: Sequence[object]) -> Sequence[Row]: ...


@dataclass(frozen=True, slots=True)
class Job:
    """One scheduled job: who made it and where it delivers, what and when it runs."""

    id: str
    person: str
    """The creator (a person id, or ``platform:user`` when not linked)."""
    creator_user_id: str
    platform: str
    chat_id: str
    thread_id: str | None
    session_key: str
    """The chat's session key (where the job was made and delivers)."""
    prompt: str
    kind: JobKind
    spec: str
    """``at``: the UNIX time; ``every``: seconds; ``cron``: the five-field expression."""
    timezone: str
    profile: str
    model: str | None
    state: JobState
    state_reason: str | None
    next_at: float | None
    created_at: float
    delivery_failures: int = 0


@dataclass(frozen=True, slots=True)
class JobRun:
    """One claimed occurrence of a job (unique per job and scheduled time)."""

    id: str
    job_id: str
    scheduled_at: float
    status: RunStatus
    owner: str
    lease_until: float
    started_at: float
    finished_at: float | None = None
    note: str | None = None
    """Said with the run's message: the missed occurrences it catches up on."""
    error: str | None = None
    session_key: str | None = None
    delivery: DeliveryStatus | None = None
    delivery_reason: str | None = None


_JOB_COLUMNS = tuple(f.name for f in fields(Job))
_RUN_COLUMNS = tuple(f.name for f in fields(JobRun))

ADD_JOB = insert_sql("jobs", _JOB_COLUMNS)
JOB = "SELECT * FROM jobs WHERE id = ?"
JOBS_OF = "SELECT * FROM jobs WHERE person = ? ORDER BY created_at, id"
ALL_JOBS = "SELECT * FROM jobs ORDER BY created_at, id"
COUNT_OF = "SELECT COUNT(*) AS n FROM jobs WHERE person = ? AND state <> 'ended'"
DUE_JOBS = (
    "SELECT * FROM jobs WHERE state = 'active' AND next_at IS NOT NULL AND next_at <= ?"
    " ORDER BY next_at LIMIT ?"
)
NEXT_DUE = "SELECT MIN(next_at) AS at FROM jobs WHERE state = 'active'"
SET_STATE = "UPDATE jobs SET state = ?, state_reason = ? WHERE id = ?"
ADVANCE = "UPDATE jobs SET next_at = ?, state = ? WHERE id = ? AND next_at = ? AND state = 'active'"
RESCHEDULE = "UPDATE jobs SET next_at = ?, state = 'active', state_reason = NULL WHERE id = ?"
DELIVERY_FAILED = "UPDATE jobs SET delivery_failures = delivery_failures + 1 WHERE id = ?"
DELIVERY_SENT = "UPDATE jobs SET delivery_failures = 0 WHERE id = ?"
DELETE_RUNS = "DELETE FROM job_runs WHERE job_id = ?"
DELETE_JOB = "DELETE FROM jobs WHERE id = ?"

CLAIM = insert_sql("job_runs", _RUN_COLUMNS, " ON CONFLICT (job_id, scheduled_at) DO NOTHING")
RUN = "SELECT * FROM job_runs WHERE id = ?"
RUNS_OF = "SELECT * FROM job_runs WHERE job_id = ? ORDER BY scheduled_at DESC LIMIT ?"
RUNS_AT = "SELECT * FROM job_runs WHERE job_id = ? AND scheduled_at = ?"
RENEW = "UPDATE job_runs SET lease_until = ? WHERE owner = ? AND status = 'running'"
FINISH = (
    "UPDATE job_runs SET status = ?, finished_at = ?, error = ? WHERE id = ? AND status = 'running'"
)
DELIVERY = "UPDATE job_runs SET delivery = ?, delivery_reason = ? WHERE id = ?"
EXPIRED = "SELECT * FROM job_runs WHERE status = 'running' AND lease_until < ?"
INTERRUPT = (
    "UPDATE job_runs SET status = 'interrupted', finished_at = ?,"
    " error = 'the process running it stopped' WHERE id = ? AND status = 'running'"
    " AND lease_until < ?"
)
RUN_COUNTS = "SELECT status, COUNT(*) AS n FROM job_runs GROUP BY status"
DELIVERY_COUNTS = (
    "SELECT delivery, COUNT(*) AS n FROM job_runs WHERE delivery IS NOT NULL GROUP BY delivery"
)

SET_TIMEZONE = (
    "INSERT INTO person_timezones (person, timezone) VALUES (?, ?)"
    " ON CONFLICT (person) DO UPDATE SET timezone = excluded.timezone"
)
TIMEZONE_OF = "SELECT timezone FROM person_timezones WHERE person = ?"


def job_from_row(row: Row) -> Job:
    return Job(**{name: row[name] for name in _JOB_COLUMNS})


def run_from_row(row: Row) -> JobRun:
    return JobRun(**{name: row[name] for name in _RUN_COLUMNS})


def job_book(store: object) -> JobBook:
    """The :class:`JobBook` of an opened store (``TypeError`` for one that cannot run
    statements of feature modules)."""
    if not isinstance(store, StatementRunner):
        raise TypeError(f"{type(store).__name__} cannot keep scheduled jobs")
    return JobBook(store)


class JobBook:
    """The jobs, runs and time zones of one store (each method one committed statement)."""

    def __init__(self, store: StatementRunner) -> None:
        self._store = store

    # jobs -------------------------------------------------------------------
    async def add(self, job: Job) -> None:
        params = tuple(getattr(job, name) for name in _JOB_COLUMNS)
        await self._store.run_statement(Statement(ADD_JOB, params, f"add job {job.id}"))

    async def job(self, job_id: str) -> Job | None:
        rows = await self._store.read_rows(JOB, (job_id,))
        return job_from_row(rows[0]) if rows else None

    async def jobs(self, person: str | None = None) -> list[Job]:
        """Every job (``person``: only theirs), oldest first."""
        if person is None:
            rows = await self._store.read_rows(ALL_JOBS, ())
        else:
            rows = await self._store.read_rows(JOBS_OF, (person,))
        return [job_from_row(row) for row in rows]

    async def count_of(self, person: str) -> int:
        """How many jobs of ``person`` have not ended."""
        rows = await self._store.read_rows(COUNT_OF, (person,))
        return int(rows[0]["n"])

    async def due(self, now: float, limit: int = 200) -> list[Job]:
        """Active jobs whose next occurrence is at or before ``now``, earliest first."""
        return [job_from_row(r) for r in await self._store.read_rows(DUE_JOBS, (now, limit))]

    async def next_due_at(self) -> float | None:
        """The earliest next occurrence of any active job."""
        rows = await self._store.read_rows(NEXT_DUE, ())
        at = rows[0]["at"] if rows else None
        return None if at is None else float(at)

    async def set_state(self, job_id: str, state: JobState, reason: str | None = None) -> bool:
        statement = Statement(SET_STATE, (state, reason, job_id), f"job {job_id}")
        return await self._store.run_statement(statement) == 1

    async def advance(self, job: Job, next_at: float | None) -> bool:
        """Move the job past its current occurrence (``None``: it has no more; it ends),
        unless another process already did (False)."""
        state: JobState = "active" if next_at is not None else "ended"
        params = (next_at, state, job.id, job.next_at)
        return await self._store.run_statement(Statement(ADVANCE, params, "advance")) == 1

    async def reschedule(self, job_id: str, next_at: float) -> bool:
        """Active again from ``next_at`` (a resumed job)."""
        statement = Statement(RESCHEDULE, (next_at, job_id), f"job {job_id}")
        return await self._store.run_statement(statement) == 1

    async def delete(self, job_id: str) -> bool:
        await self._store.run_statement(Statement(DELETE_RUNS, (job_id,), "delete runs"))
        return await self._store.run_statement(Statement(DELETE_JOB, (job_id,), "delete")) == 1

    async def delivery_failed(self, job_id: str) -> int:
        """Count one more undeliverable answer; the count in a row."""
        await self._store.run_statement(Statement(DELIVERY_FAILED, (job_id,), "count"))
        job = await self.job(job_id)
        return job.delivery_failures if job is not None else 0

    async def delivery_sent(self, job_id: str) -> None:
        await self._store.run_statement(Statement(DELIVERY_SENT, (job_id,), "reset"))

    # runs -------------------------------------------------------------------
    async def claim(self, run: JobRun) -> bool:
        """Record ``run``, claiming its occurrence: False when it was claimed already."""
        params = tuple(getattr(run, name) for name in _RUN_COLUMNS)
        doing = f"claim {run.job_id} at {run.scheduled_at}"
        return await self._store.run_statement(Statement(CLAIM, params, doing)) == 1

    async def run(self, run_id: str) -> JobRun | None:
        rows = await self._store.read_rows(RUN, (run_id,))
        return run_from_row(rows[0]) if rows else None

    async def runs_of(self, job_id: str, limit: int = 20) -> list[JobRun]:
        """The job's runs, latest occurrence first."""
        rows = await self._store.read_rows(RUNS_OF, (job_id, limit))
        return [run_from_row(row) for row in rows]

    async def renew(self, owner: str, until: float) -> int:
        """Extend the lease of every run ``owner`` is running."""
        return await self._store.run_statement(Statement(RENEW, (until, owner), "renew"))

    async def finish(
        self, run_id: str, status: RunStatus, now: float, error: str | None = None
    ) -> bool:
        """The run ended (only a running one changes)."""
        statement = Statement(FINISH, (status, now, error, run_id), f"run {run_id}")
        return await self._store.run_statement(statement) == 1

    async def set_delivery(
        self, run_id: str, status: DeliveryStatus, reason: str | None = None
    ) -> None:
        await self._store.run_statement(Statement(DELIVERY, (status, reason, run_id), "deliver"))

    async def interrupt_expired(self, now: float) -> list[JobRun]:
        """Mark ``interrupted`` every running run whose lease expired before ``now`` (its
        process died); the runs this call marked. They are never run again."""
        marked = []
        for row in await self._store.read_rows(EXPIRED, (now,)):
            run = run_from_row(row)
            statement = Statement(INTERRUPT, (now, run.id, now), f"interrupt {run.id}")
            if await self._store.run_statement(statement) == 1:
                marked.append(run)
        return marked

    async def run_counts(self) -> dict[str, int]:
        rows = await self._store.read_rows(RUN_COUNTS, ())
        return {str(row["status"]): int(row["n"]) for row in rows}

    async def delivery_counts(self) -> dict[str, int]:
        rows = await self._store.read_rows(DELIVERY_COUNTS, ())
        return {str(row["delivery"]): int(row["n"]) for row in rows}

    # time zones -------------------------------------------------------------
    async def set_timezone(self, person: str, timezone: str) -> None:
        statement = Statement(SET_TIMEZONE, (person, timezone), f"time zone of {person}")
        await self._store.run_statement(statement)

    async def timezone_of(self, person: str) -> str | None:
        rows = await self._store.read_rows(TIMEZONE_OF, (person,))
        return str(rows[0]["timezone"]) if rows else None
