"""A call that finds no call waiting and its budgets free starts at once, in the caller's
turn of the event loop (gateway/outbound/scheduler.py; docs/architecture.md, "The outbound
scheduler", Order); any other call waits in the queue and keeps its order there.

The budget is one message per chat per hour on a clock that never moves: the first message
of a chat may go, the second may not."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace

from adapters.base import EVERY_CALL, Capabilities, Charges, ChatRef, RateLimit
from core.store.fencing import Fence, current_fence, fenced
from gateway.outbound.scheduler import OutboundScheduler, Priority

CHAT = ChatRef("telegram", "42")
OTHER = ChatRef("telegram", "43")
ONE_PER_HOUR = RateLimit(1, 3600.0)
CAPS = Capabilities(
    max_text_length=4096, length_unit="utf16", supports_edit=True, button_payload_limit=64,
    edit_interval=1.0, markup="plain", chat_limit=ONE_PER_HOUR,
    charges=Charges(bot=EVERY_CALL, chat=frozenset({"send"}), group=frozenset({"send"})),
)  # fmt: skip
BOUND = 5.0


def frozen() -> OutboundScheduler:
    return OutboundScheduler(CAPS, clock=lambda: 0.0)


def made(log: list[str], what: str) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        log.append(what)

    return call


async def test_a_call_with_its_budget_free_and_no_queue_starts_before_its_caller_yields() -> None:
    scheduler, log = frozen(), []
    scheduler.later(made(log, "first"), chat=CHAT, priority=Priority.REPLY, what="m", kind="send")
    assert (scheduler.stats.calls, scheduler.waiting) == (1, 0)  # started, nothing queued
    scheduler.later(made(log, "held"), chat=CHAT, priority=Priority.REPLY, what="m", kind="send")
    assert (scheduler.stats.calls, scheduler.waiting) == (1, 1)  # the chat's hour is used
    await scheduler.aclose()
    assert log == ["first"]


async def test_a_call_behind_a_waiting_one_queues_even_with_its_own_budget_free() -> None:
    """Another chat's budget is free, but a call waits already: the new one takes its
    place in the queue (the pump starts it) rather than passing it at submit."""
    scheduler, log = frozen(), []
    scheduler.later(made(log, "first"), chat=CHAT, priority=Priority.REPLY, what="m", kind="send")
    scheduler.later(made(log, "held"), chat=CHAT, priority=Priority.REPLY, what="m", kind="send")
    other = scheduler.run(made(log, "other"), chat=OTHER, priority=Priority.REPLY, what="m")
    waiting = asyncio.ensure_future(other)
    await asyncio.sleep(0)  # the caller submits; the pump has not run yet
    assert (scheduler.stats.calls, scheduler.waiting) == (1, 2)
    await asyncio.wait_for(waiting, BOUND)
    assert log == ["first", "other"] and scheduler.waiting == 1
    await scheduler.aclose()


async def test_a_call_of_an_uncounted_kind_starts_at_once_beside_a_full_chat() -> None:
    scheduler, log = frozen(), []
    scheduler.later(made(log, "first"), chat=CHAT, priority=Priority.REPLY, what="m", kind="send")
    typing = made(log, "typing")
    scheduler.later(typing, chat=CHAT, priority=Priority.CLEANUP, what="t", kind="typing")
    assert (scheduler.stats.calls, scheduler.waiting) == (2, 0)
    await asyncio.wait_for(scheduler.aclose(), BOUND)


async def test_a_queued_call_runs_in_its_own_callers_context_not_the_pumps() -> None:
    """Two sessions' calls queue in one chat: the pump is started by the second session's
    call, and still each call is made under the fence of the session that asked for it."""
    one_at_a_time = replace(CAPS, chat_limit=RateLimit(1, 0.0))  # one in flight per chat
    scheduler = OutboundScheduler(one_at_a_time, clock=lambda: 0.0)
    one, two = Fence("session:one", "p/1", 1), Fence("session:two", "p/1", 3)
    started, gate = asyncio.Event(), asyncio.Event()
    seen: list[tuple[str, Fence | None]] = []

    def made(text: str) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            if text == "first":
                started.set()
                await gate.wait()
            seen.append((text, current_fence()))

        return call

    async def send(fence: Fence, text: str) -> None:
        with fenced(fence):
            await scheduler.run(made(text), chat=CHAT, priority=Priority.REPLY, what="m")

    first = asyncio.ensure_future(send(one, "first"))
    await asyncio.wait_for(started.wait(), BOUND)
    rest = [asyncio.ensure_future(send(two, "for two")), asyncio.ensure_future(send(one, "again"))]
    await asyncio.sleep(0)  # both submitted; the first holds the chat
    assert scheduler.waiting == 2
    gate.set()
    await asyncio.wait_for(asyncio.gather(first, *rest), BOUND)
    assert seen == [("first", one), ("for two", two), ("again", one)]
    await scheduler.aclose()
