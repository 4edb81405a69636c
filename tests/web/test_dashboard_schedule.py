"""Scheduled jobs on the dashboard and ``/metrics`` (README "Scheduled turns"): the
gateway composed by the wiring with ``[schedule] enabled``, over real HTTP; off, neither
shows anything of them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import aiohttp

from core.model.demo import DemoModel
from core.store.jobs import Job, job_book
from core.store.sqlite import SqliteStore
from gateway.web.compose import web_adapter_of
from gateway.wiring import build_service
from tests.web.harness import EventStream, Running, close, web_config


def job() -> Job:
    now = time.time()
    return Job(
        id="a1b2c3d4", person="telegram:42", creator_user_id="42", platform="telegram",
        chat_id="42", thread_id=None, session_key="telegram:dm:42", prompt="stretch",
        kind="every", spec="86400", timezone="UTC", profile="default", model=None,
        state="paused", state_reason="paused: 3 answers in a row undeliverable (Forbidden)",
        next_at=now + 86400, created_at=now,
    )  # fmt: skip


async def state_and_metrics(
    tmp_path: Path, store: SqliteStore, extra: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    service = build_service(web_config(tmp_path, extra), store, DemoModel())
    await service.start()
    running = Running(service, web_adapter_of(service), aiohttp.ClientSession(trust_env=False))
    try:
        stream = EventStream(await running.http.get(running.url + "/api/dashboard/events"))
        stream.start()
        try:
            frame = await stream.wait_for(
                lambda frames: next((f for f in frames if f.kind == "state"), None)
            )
        finally:
            await stream.close()
        metrics = await (await running.http.get(running.url + "/metrics")).text()
    finally:
        await close(running)
    assert frame is not None
    return frame.data, metrics


async def test_the_dashboard_lists_jobs_and_metrics_count_runs_only_when_on(
    tmp_path: Path, store: SqliteStore
) -> None:
    await job_book(store).add(job())
    state, metrics = await state_and_metrics(tmp_path, store, {"schedule": {"enabled": True}})
    (shown,) = state["jobs"]
    assert shown["id"] == "a1b2c3d4" and shown["who"] == "telegram:42"
    assert shown["state"] == "paused: 3 answers in a row undeliverable (Forbidden)"
    assert shown["what"] == "every 86400 s: stretch" and shown["last"] == ""
    assert "commonos_schedule_lag_seconds_count 0.0" in metrics
    assert "# TYPE commonos_schedule_runs_total counter" in metrics
    state, metrics = await state_and_metrics(tmp_path, store, {})
    assert "jobs" not in state and "commonos_schedule" not in metrics
