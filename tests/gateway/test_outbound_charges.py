"""The scheduler charges a call only to the windows that count its kind
(``Capabilities.charges``): on Telegram a button press's answer and a typing indicator are
not messages, so they take no place in a chat's message budget and never hold a reply.

The budgets here are one message per hour on a clock that never moves (a call charged to
the window could not go), except where the test clock shows a window waited out at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace

from adapters.base import (
    CallKind,
    Capabilities,
    ChatRef,
    ChatType,
    InboundEvent,
    RateLimit,
    Sender,
    SessionKey,
)
from adapters.telegram.adapter import TELEGRAM_CHARGES
from gateway.outbound.scheduler import OutboundScheduler, Priority
from tests.support.clock import TestClock

CHAT = ChatRef("telegram", "42")
ONE_PER_HOUR = RateLimit(1, 3600.0)
TELEGRAM = Capabilities(
    max_text_length=4096, length_unit="utf16", supports_edit=True, button_payload_limit=64,
    edit_interval=1.0, markup="plain", bot_limit=ONE_PER_HOUR, chat_limit=ONE_PER_HOUR,
    charges=TELEGRAM_CHARGES,
)  # fmt: skip
BOUND = 5.0
"""Seconds within which a call that may go does go (a hang fails the test, not the run)."""


def in_a(chat_type: ChatType) -> InboundEvent:
    return InboundEvent(
        kind="text", platform="telegram", update_id="1", chat=CHAT, chat_type=chat_type,
        sender=Sender("42", "Alice"), session_key=SessionKey("telegram", chat_type, "42"),
    )  # fmt: skip


async def turns() -> None:
    """Let every ready task run (the scheduler's pump included); no time passes."""
    for _ in range(20):
        await asyncio.sleep(0)


def frozen() -> OutboundScheduler:
    return OutboundScheduler(TELEGRAM, clock=lambda: 0.0)


def done(what: str) -> Callable[[], Awaitable[str]]:
    async def call() -> str:
        return what

    return call


async def call(scheduler: OutboundScheduler, kind: CallKind, priority: Priority) -> str:
    run = scheduler.run(done(kind), chat=CHAT, priority=priority, what=kind, kind=kind)
    return await asyncio.wait_for(run, BOUND)


async def test_a_second_message_waits_for_the_chats_budget() -> None:
    """The control: the budget binds a message."""
    scheduler = frozen()
    await call(scheduler, "send", Priority.REPLY)
    second = asyncio.ensure_future(call(scheduler, "send", Priority.REPLY))
    await turns()
    assert scheduler.waiting == 1 and not second.done()
    await scheduler.aclose()
    second.cancel()


async def test_a_press_answer_takes_no_place_in_the_chats_message_budget() -> None:
    scheduler = frozen()
    assert await call(scheduler, "answer", Priority.URGENT) == "answer"
    assert await call(scheduler, "send", Priority.REPLY) == "send"  # the reply to the press
    await scheduler.aclose()


async def test_typing_takes_no_place_in_the_chats_message_budget() -> None:
    scheduler = frozen()
    assert await call(scheduler, "typing", Priority.CLEANUP) == "typing"
    assert await call(scheduler, "send", Priority.REPLY) == "send"
    await scheduler.aclose()


async def test_a_reply_is_never_held_by_a_typing_call_in_flight() -> None:
    scheduler = frozen()
    typing_sent, release = asyncio.Event(), asyncio.Event()

    async def slow_typing() -> None:
        typing_sent.set()
        await release.wait()

    typing = asyncio.ensure_future(
        scheduler.run(slow_typing, chat=CHAT, priority=Priority.CLEANUP, what="typing",
                      coalesce=("typing", CHAT), attempts=1, kind="typing")
    )  # fmt: skip
    await asyncio.wait_for(typing_sent.wait(), BOUND)
    assert await call(scheduler, "send", Priority.REPLY) == "send"
    assert not typing.done()  # the reply went while typing was still in flight
    release.set()
    await asyncio.wait_for(typing, BOUND)
    await scheduler.aclose()


async def test_edits_count_in_a_groups_budget_but_not_in_a_dms() -> None:
    group_only = replace(TELEGRAM, bot_limit=None, chat_limit=None, group_limit=ONE_PER_HOUR)
    scheduler = OutboundScheduler(group_only, clock=lambda: 0.0)
    scheduler.learn(in_a("dm"))
    await call(scheduler, "edit", Priority.REPLY)
    await call(scheduler, "edit", Priority.REPLY)  # a DM: edits are not counted
    scheduler.learn(in_a("group"))
    await call(scheduler, "edit", Priority.REPLY)
    second = asyncio.ensure_future(call(scheduler, "edit", Priority.REPLY))
    await turns()
    assert scheduler.waiting == 1 and not second.done()
    await scheduler.aclose()
    second.cancel()


async def test_a_window_is_waited_out_on_the_test_clock_without_waiting() -> None:
    clock = TestClock()
    scheduler = OutboundScheduler(replace(TELEGRAM, pace_clock=clock))
    started: list[float] = []

    async def send() -> None:
        started.append(clock.now())

    for _ in range(2):
        run = scheduler.run(send, chat=CHAT, priority=Priority.REPLY, what="m", kind="send")
        await asyncio.wait_for(run, BOUND)
    assert started[1] - started[0] >= ONE_PER_HOUR.seconds  # an hour on the clock
    assert clock.skipped >= ONE_PER_HOUR.seconds - 1.0  # ... none of it waited for
    await scheduler.aclose()
