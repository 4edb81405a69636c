"""CancellationToken.guard: the work's result, or Cancelled the moment the token is cancelled
(core/cancellation.py)."""

from __future__ import annotations

import asyncio

import pytest

from core.cancellation import CancellationToken, Cancelled


async def test_the_guarded_works_result_and_its_error_come_back_as_they_are() -> None:
    token = CancellationToken()

    async def fails() -> None:
        raise ValueError("the tool broke")

    assert await token.guard(asyncio.sleep(0, "done")) == "done"
    with pytest.raises(ValueError, match="the tool broke"):
        await token.guard(fails())
    assert not token.cancelled


class Hanging:
    """Work that runs until cancelled, saying when it started and when it ended."""

    def __init__(self) -> None:
        self.started, self.ended = asyncio.Event(), False

    async def run(self) -> None:
        self.started.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.ended = True


async def test_cancelling_the_token_ends_the_guard_and_cancels_the_work() -> None:
    token, work = CancellationToken(), Hanging()
    guarded = asyncio.create_task(token.guard(work.run()))
    await work.started.wait()
    token.cancel("stopped by the user")
    with pytest.raises(Cancelled, match="stopped by the user"):
        await guarded
    assert work.ended


async def test_two_guards_on_one_token_both_end_when_it_is_cancelled() -> None:
    token, works = CancellationToken(), [Hanging(), Hanging()]
    first = asyncio.create_task(token.guard(works[0].run()))
    second = asyncio.create_task(token.child().guard(works[1].run()))
    await asyncio.gather(*(w.started.wait() for w in works))
    token.cancel()
    results = await asyncio.gather(first, second, return_exceptions=True)
    assert [type(r) for r in results] == [Cancelled, Cancelled]
    assert all(w.ended for w in works)


async def test_cancelling_the_guarding_task_cancels_the_work_and_propagates() -> None:
    token, work = CancellationToken(), Hanging()
    guarded = asyncio.create_task(token.guard(work.run()))
    await work.started.wait()
    guarded.cancel()
    with pytest.raises(asyncio.CancelledError):
        await guarded
    assert work.ended and not token.cancelled


async def test_a_guard_on_a_cancelled_token_never_starts_the_work() -> None:
    token, ran = CancellationToken(), []

    async def work() -> None:
        ran.append("work")

    token.cancel("interrupted")
    with pytest.raises(Cancelled, match="interrupted"):
        await token.guard(work())
    assert ran == []
