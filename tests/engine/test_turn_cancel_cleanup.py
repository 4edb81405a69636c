"""Cancelled work is awaited, never dropped: guard/time_boxed cancelled from outside, turn
cleanup cancelled again, abandoned work drained at shutdown, a turn cancelled as it starts."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from core.agent.control import TurnControl
from core.agent.loop import CommonAgent
from core.agent.turn import UserMessage
from core.cancellation import CancellationToken, abandoned_count, drain_abandoned
from core.store.base import TurnRecord
from core.store.sqlite import SqliteStore
from core.tools.base import ToolContext, ToolResult
from tests.engine.conftest import KEY, USER, Rig, make_tool
from tests.support.model_server import reply_hang, reply_text, reply_tool_call

WIND_DOWN_STEPS = 3
"""Loop iterations the work below needs after its cancellation before it has ended."""


async def slow_to_wind_down(started: asyncio.Event, ended: asyncio.Event) -> None:
    """Work that honours cancellation, but takes a few loop iterations to clean up."""
    started.set()
    try:
        await asyncio.Event().wait()
    finally:
        for _ in range(WIND_DOWN_STEPS):
            await asyncio.sleep(0)
        ended.set()


async def cancel_once_started(outer: asyncio.Task[Any], started: asyncio.Event) -> None:
    await asyncio.wait_for(started.wait(), 5)
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer


async def test_a_cancelled_guard_awaits_its_work_before_propagating() -> None:
    started, ended = asyncio.Event(), asyncio.Event()
    token = CancellationToken()
    outer = asyncio.create_task(token.guard(slow_to_wind_down(started, ended)))

    await cancel_once_started(outer, started)

    assert ended.is_set()


async def test_a_cancelled_time_box_awaits_its_work_before_propagating() -> None:
    started, ended = asyncio.Event(), asyncio.Event()
    boxed = CancellationToken.time_boxed(slow_to_wind_down(started, ended), 30)
    outer = asyncio.create_task(boxed)

    await cancel_once_started(outer, started)

    assert ended.is_set()


async def test_drain_abandoned_reports_work_that_still_ignores_cancellation() -> None:
    started, release, ended = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def deaf() -> None:
        started.set()
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue
        ended.set()

    token = CancellationToken()
    guarded = asyncio.create_task(token.guard(deaf()))
    await asyncio.wait_for(started.wait(), 5)
    token.cancel()
    with pytest.raises(Exception, match="cancelled"):
        await guarded
    try:
        assert await drain_abandoned(0.01) >= 1
    finally:
        release.set()
    await asyncio.wait_for(ended.wait(), 5)
    assert await drain_abandoned(1.0) == 0
    assert abandoned_count() == 0


async def test_drain_abandoned_ends_a_stopped_tool_that_ignored_cancellation_once(
    rig: Rig,
) -> None:
    started = asyncio.Event()
    tool_tasks: list[asyncio.Task[Any]] = []

    async def ignores_once(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        task = asyncio.current_task()
        assert task is not None
        tool_tasks.append(task)
        started.set()
        with contextlib.suppress(asyncio.CancelledError):  # the misbehaviour under test
            await asyncio.Event().wait()
        await asyncio.Event().wait()
        return ToolResult("never")

    rig.tools.register(make_tool("ignores_once", ignores_once))
    rig.server.script(reply_tool_call("ignores_once", {}))
    control = TurnControl()
    turn = asyncio.create_task(rig.turn("go", control=control))
    await asyncio.wait_for(started.wait(), 5)
    control.stop()
    result = await asyncio.wait_for(turn, 2)
    assert result.status == "interrupted"
    assert abandoned_count() >= 1 and not tool_tasks[0].done()

    assert await drain_abandoned(1.0) == 0

    assert tool_tasks[0].done() and tool_tasks[0].cancelled()
    assert abandoned_count() == 0


async def test_a_second_cancel_during_turn_cleanup_awaits_the_cleanup(rig: Rig) -> None:
    entered, ended = asyncio.Event(), asyncio.Event()

    async def hanging_end(**kwargs: Any) -> None:
        await slow_to_wind_down(entered, ended)

    rig.hooks.register("on_session_end", hanging_end)
    rig.server.script(reply_hang(reply_text("never")))
    turn = asyncio.create_task(rig.turn("hi"))
    await rig.server.wait_for_requests(1)
    turn.cancel()  # first cancel: the turn records itself, then on_session_end hangs
    await asyncio.wait_for(entered.wait(), 5)

    await cancel_once_started(turn, entered)  # second cancel: cleanup is cut short

    assert ended.is_set()
    session = await rig.store.get_active_session(KEY)
    assert session is not None
    [record] = await rig.store.list_turns(session.id)
    assert (record.status, record.exit_reason) == ("interrupted", "cancelled")


class StartThenHang:
    """The real store, but ``start_turn`` hangs after its write (to cancel the turn there)."""

    def __init__(self, inner: SqliteStore) -> None:
        self._inner = inner
        self.started = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def start_turn(self, session_id: str, turn_id: str) -> TurnRecord:
        record = await self._inner.start_turn(session_id, turn_id)
        self.started.set()
        await asyncio.Event().wait()
        return record


async def test_a_turn_cancelled_while_its_record_starts_is_recorded_interrupted(
    rig: Rig,
) -> None:
    store = StartThenHang(rig.store)
    agent = CommonAgent(
        store,  # type: ignore[arg-type]
        rig.client,
        rig.tools,
        rig.hooks,
        rig.approvals,
        rig.profile,
    )
    control = TurnControl()
    turn = asyncio.create_task(agent.run_turn(KEY, UserMessage("hi", sender_id=USER), control))

    await cancel_once_started(turn, store.started)

    session = await rig.store.get_active_session(KEY)
    assert session is not None
    [record] = await rig.store.list_turns(session.id)
    assert (record.status, record.exit_reason) == ("interrupted", "cancelled")
    assert rig.server.requests == []
