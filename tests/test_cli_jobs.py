"""``commonos jobs`` on a real store file (README "Scheduled turns"), through the command
line's own ``main``: list shows each job with its next run and last outcome; pause and
delete change the store; an unknown id exits 1 with one line."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.store.jobs import Job, JobRun, job_book
from core.store.sqlite import open_store
from gateway.cli.main import main
from tests.test_cli_inbox import db_path

AT = 1_800_000_000.0  # 2027-01-15 08:00 UTC


def job(job_id: str) -> Job:
    return Job(
        id=job_id, person="telegram:42", creator_user_id="42", platform="telegram",
        chat_id="42", thread_id=None, session_key="telegram:dm:42", prompt="stretch",
        kind="every", spec="3600", timezone="UTC", profile="default", model=None,
        state="active", state_reason=None, next_at=AT + 3600, created_at=AT,
    )  # fmt: skip


async def seed(path: Path) -> None:
    store = await open_store(path)
    try:
        book = job_book(store)
        await book.add(job("a1"))
        await book.add(job("b2"))
        await book.claim(JobRun("r", "a1", AT, "running", "p", AT + 60, AT))
        await book.finish("r", "succeeded", AT + 5)
        await book.set_delivery("r", "failed", "Forbidden: bot was blocked by the user")
    finally:
        await store.close()


async def left(path: Path) -> list[tuple[str, str, str | None]]:
    store = await open_store(path)
    try:
        return [(j.id, j.state, j.state_reason) for j in await job_book(store).jobs()]
    finally:
        await store.close()


def commonos(home: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([*args, "--config", str(home / "config.toml")])
    out, err = capsys.readouterr()
    return code, out, err


def test_jobs_list_pause_delete_and_an_unknown_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = db_path(tmp_path)
    asyncio.run(seed(path))
    code, out, err = commonos(tmp_path, capsys, "jobs", "list")
    assert (code, err) == (0, "")
    first, second = out.splitlines()
    assert first.startswith("a1  telegram:42  active  next 2027-01-15 09:00  last succeeded")
    assert "delivery failed (Forbidden: bot was blocked by the user)" in first
    assert "never ran  every 3600 s: stretch" in second
    assert commonos(tmp_path, capsys, "jobs", "pause", "a1") == (0, "paused job a1\n", "")
    assert commonos(tmp_path, capsys, "jobs", "delete", "b2") == (0, "deleted job b2\n", "")
    code, out, err = commonos(tmp_path, capsys, "jobs", "delete", "zz")
    assert (code, out) == (1, "")
    assert err == "commonos: no job zz (see `commonos jobs list`)\n"
    assert asyncio.run(left(path)) == [("a1", "paused", "paused by the operator")]
