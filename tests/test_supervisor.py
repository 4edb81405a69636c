"""The Supervisor keeps one connection alive in a task of its own (adapters/health.py)."""

from __future__ import annotations

import asyncio

import pytest

from adapters.health import Backoff, Fatal, HealthCell, Supervisor


class Connection:
    """A connection that holds until cancelled, then takes a step to close."""

    def __init__(self) -> None:
        self.receiving = asyncio.Event()
        self.ended: list[str] = []

    async def connect(self) -> None:
        self.receiving.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0)  # closing takes a turn of the loop
            self.ended.append("closed")
            raise


async def test_cancelling_the_supervisor_ends_the_connection_before_it_returns() -> None:
    connection = Connection()
    supervisor = Supervisor(HealthCell("fake"), connection.connect)
    running = asyncio.create_task(supervisor.run())
    await connection.receiving.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert connection.ended == ["closed"]


async def test_a_transient_end_is_retried_and_a_fatal_one_leaves_the_connection_down() -> None:
    ends: list[BaseException] = [ConnectionResetError("reset by peer"), Fatal("bad token: fix it")]
    waits: list[float] = []

    async def connect() -> None:
        raise ends.pop(0)

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    cell = HealthCell("fake")
    supervisor = Supervisor(cell, connect, backoff=Backoff(base=1.0, cap=1.0), sleep=sleep)
    await supervisor.run()
    assert (supervisor.restarts, len(waits)) == (1, 1)
    assert 0.1 <= waits[0] <= 1.0
    assert (cell.value.state, cell.value.reason) == ("down", "bad token: fix it")
    assert list(cell.recent) == ["starting", "retrying", "down"]
