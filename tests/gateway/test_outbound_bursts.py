"""A chat's message budget as Telegram documents it: about one message a second with short
bursts allowed — a token bucket (``RateLimit(1, 1.0, burst=N)``) —, a 429's ``retry_after``
obeyed for its chat alone, and only messages charged: a reaction, a typing indicator or a
button's answer neither takes from a chat's budget nor waits on it.

Time here is a :class:`ManualClock` the test moves (a nap of the scheduler waits until the
test moves it), or the :class:`~tests.support.clock.TestClock` that skips every wait."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import replace

import pytest

from adapters.base import CallKind, Capabilities, ChatRef, RateLimit, RateLimited
from adapters.telegram.adapter import TELEGRAM_CHARGES
from gateway.outbound.scheduler import OutboundScheduler, Priority
from tests.support.clock import TestClock

ALICE = ChatRef("telegram", "1")
BOB = ChatRef("telegram", "2")
BOUND = 5.0
"""Seconds within which a call that may go does go (a hang fails the test, not the run)."""


def bursts(burst: int) -> Capabilities:
    return Capabilities(
        max_text_length=4096, length_unit="utf16", supports_edit=True, button_payload_limit=64,
        edit_interval=1.0, markup="plain", chat_limit=RateLimit(1, 1.0, burst=burst),
        charges=TELEGRAM_CHARGES,
    )  # fmt: skip


class ManualClock:
    """Time moves only when the test says; a nap lasts until then."""

    def __init__(self) -> None:
        self.at = 0.0
        self._moved = asyncio.Event()

    def now(self) -> float:
        return self.at

    async def sleep(self, seconds: float) -> None:
        self._moved.clear()
        await self._moved.wait()

    def advance(self, seconds: float) -> None:
        self.at += seconds
        self._moved.set()


async def turns() -> None:
    """Let every ready task run (the scheduler's pump included); no time passes."""
    for _ in range(20):
        await asyncio.sleep(0)


def on_manual_clock(burst: int) -> tuple[OutboundScheduler, ManualClock]:
    clock = ManualClock()
    return OutboundScheduler(bursts(burst), clock=clock.now, sleep=clock.sleep), clock


def made(what: str, log: list[str] | None = None) -> Callable[[], Awaitable[str]]:
    async def call() -> str:
        if log is not None:
            log.append(what)
        return what

    return call


def queue(
    scheduler: OutboundScheduler, kind: CallKind, chat: ChatRef = ALICE, **how: object
) -> asyncio.Future[str]:
    priority = how.pop("priority", Priority.REPLY)
    assert isinstance(priority, Priority)
    run = scheduler.run(made(kind), chat=chat, priority=priority, what=kind, kind=kind)
    return asyncio.ensure_future(run)


async def test_a_burst_goes_at_once_then_one_message_a_second() -> None:
    clock = TestClock()
    scheduler = OutboundScheduler(replace(bursts(3), pace_clock=clock))
    started: list[tuple[float, float]] = []  # (clock, seconds of waiting skipped)

    async def send() -> None:
        started.append((clock.now(), clock.skipped))

    for _ in range(5):
        run = scheduler.run(send, chat=ALICE, priority=Priority.REPLY, what="m", kind="send")
        await asyncio.wait_for(run, BOUND)
    assert [skipped for _, skipped in started[:3]] == [0.0, 0.0, 0.0]  # the burst
    gaps = [later[0] - earlier[0] for earlier, later in itertools.pairwise(started[2:])]
    assert all(0.9 <= gap < 1.5 for gap in gaps), gaps  # then about one a second
    assert clock.skipped >= 1.8  # ... none of it waited for
    await scheduler.aclose()


async def test_a_429s_retry_after_holds_its_chat_alone_and_is_obeyed() -> None:
    scheduler, clock = on_manual_clock(burst=5)
    attempts: list[float] = []
    refused = asyncio.Event()

    async def flooded() -> str:
        attempts.append(clock.now())
        if len(attempts) == 1:
            refused.set()
            raise RateLimited(3.0)
        return "sent"

    alice = asyncio.ensure_future(
        scheduler.run(flooded, chat=ALICE, priority=Priority.REPLY, what="reply", kind="send")
    )
    await asyncio.wait_for(refused.wait(), BOUND)
    bob = queue(scheduler, "send", BOB)
    assert await asyncio.wait_for(bob, BOUND) == "send"  # another chat: not held
    clock.advance(2.9)
    await turns()
    assert attempts == [0.0] and not alice.done()  # Alice's chat: held for retry_after
    clock.advance(0.2)
    assert await asyncio.wait_for(alice, BOUND) == "sent"
    assert attempts[1] >= 3.0
    assert scheduler.stats.rate_limited == 1
    await scheduler.aclose()


async def test_after_a_429_the_chat_goes_on_one_message_a_second() -> None:
    """The platform's bucket is empty after a 429: so is ours, no second burst."""
    scheduler, clock = on_manual_clock(burst=5)
    refusals = [RateLimited(1.0)]

    async def flooded() -> str:
        if refusals:
            raise refusals.pop()
        return "sent"

    first = scheduler.run(flooded, chat=ALICE, priority=Priority.REPLY, what="r", kind="send")
    first_done = asyncio.ensure_future(first)
    await turns()
    clock.advance(1.0)
    await asyncio.wait_for(first_done, BOUND)
    second = queue(scheduler, "send")
    await turns()
    assert not second.done()  # the bucket refills from empty
    clock.advance(1.0)
    assert await asyncio.wait_for(second, BOUND) == "send"
    await scheduler.aclose()


@pytest.mark.parametrize(
    ("kind", "priority"),
    [("react", Priority.CLEANUP), ("typing", Priority.CLEANUP), ("answer", Priority.URGENT)],
)
async def test_reactions_typing_and_answers_neither_take_nor_wait_on_the_budget(
    kind: CallKind, priority: Priority
) -> None:
    scheduler, _clock = on_manual_clock(burst=1)  # one message, and time never moves
    for _ in range(3):  # take nothing from the budget ...
        assert await asyncio.wait_for(queue(scheduler, kind, priority=priority), BOUND) == kind
    assert await asyncio.wait_for(queue(scheduler, "send"), BOUND) == "send"  # ... it is whole
    held = queue(scheduler, "send")
    await turns()
    assert not held.done()  # the control: the budget is spent
    after = queue(scheduler, kind, priority=priority)
    assert await asyncio.wait_for(after, BOUND) == kind  # ... and they do not wait on it
    await scheduler.aclose()
    held.cancel()


async def test_a_reaction_is_not_held_by_its_chats_429() -> None:
    scheduler, _clock = on_manual_clock(burst=5)

    async def flooded() -> str:
        raise RateLimited(30.0)

    reply = asyncio.ensure_future(
        scheduler.run(flooded, chat=ALICE, priority=Priority.REPLY, what="reply", kind="send")
    )
    await turns()
    assert scheduler.stats.rate_limited == 1 and not reply.done()
    react = queue(scheduler, "react", priority=Priority.CLEANUP)
    assert await asyncio.wait_for(react, BOUND) == "react"
    await scheduler.aclose()
    with pytest.raises(Exception, match="stopping"):
        await reply


async def test_a_stream_update_never_takes_the_chats_last_token() -> None:
    """Drafts never delay the final message: the last token is the reply's."""
    scheduler, _clock = on_manual_clock(burst=2)
    draft = queue(scheduler, "live", priority=Priority.STREAM)
    assert await asyncio.wait_for(draft, BOUND) == "live"
    second_draft = queue(scheduler, "live", priority=Priority.STREAM)
    await turns()
    assert not second_draft.done()  # one token left: kept
    assert await asyncio.wait_for(queue(scheduler, "send"), BOUND) == "send"  # the reply
    await scheduler.aclose()
    second_draft.cancel()
