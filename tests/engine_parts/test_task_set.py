"""TaskSet: every task tracked, failures logged by name, closing time-boxed."""

from __future__ import annotations

import asyncio
import logging

import pytest

from core import tasks
from core.bounded import BoundedMap
from core.per_key import per_key
from core.tasks import TaskSet


async def test_a_failing_task_is_logged_with_its_name_and_forgotten(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def boom() -> None:
        raise RuntimeError("boom")

    spawned = TaskSet()
    with caplog.at_level(logging.ERROR, logger="core.tasks"):
        task = spawned.spawn(boom(), name="worker:x")
        await asyncio.wait({task})
    assert len(spawned) == 0
    assert any(r.getMessage() == "worker:x failed" and r.exc_info for r in caplog.records)


async def test_aclose_lets_prompt_tasks_finish_and_cancels_late_ones() -> None:
    spawned, finished = TaskSet(), asyncio.Event()

    async def prompt() -> None:
        finished.set()

    late = spawned.spawn(asyncio.Event().wait(), name="late")
    spawned.spawn(prompt(), name="prompt")
    assert await spawned.aclose(grace=0.05) == 1
    assert finished.is_set() and late.cancelled() and len(spawned) == 0


async def test_a_task_ignoring_cancellation_is_logged_not_waited_on_forever(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(tasks, "CANCEL_SECONDS", 0.05)
    started, release = asyncio.Event(), asyncio.Event()

    async def stubborn() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()  # cleanup that outlives the time box

    spawned = TaskSet()
    task = spawned.spawn(stubborn(), name="stubborn")
    await asyncio.wait_for(started.wait(), 5)
    with caplog.at_level(logging.ERROR, logger="core.tasks"):
        await spawned.aclose()
    assert "stubborn did not end when cancelled" in caplog.text and not task.done()
    release.set()
    await asyncio.wait({task})


async def test_drain_waits_for_tasks_spawned_meanwhile() -> None:
    spawned, order = TaskSet(), list[str]()

    async def second() -> None:
        order.append("second")

    async def first() -> None:
        order.append("first")
        spawned.spawn(second(), name="second")

    spawned.spawn(first(), name="first")
    await asyncio.wait_for(spawned.drain(), 5)
    assert order == ["first", "second"] and len(spawned) == 0


def test_bounded_map_drops_the_least_recently_put_first() -> None:
    table: BoundedMap[str, int] = BoundedMap(2)
    table.put("a", 1)
    table.put("b", 2)
    table.put("a", 3)  # "a" is now the most recent
    table.put("c", 4)
    assert list(table.items()) == [("a", 3), ("c", 4)]


def test_per_key_takes_a_value_or_a_function_of_the_key() -> None:
    assert per_key(5)("any") == 5
    assert per_key(len)("four") == 4
