"""Inbound receipts: each event the router takes says how its handling ended.

True once a turn's reply was delivered, at once for what the router handles whole (a
command, a press, a folded or refused message) and for queued messages dropped by /stop;
False when a shutdown cut the handling short, so a durable inbox replays the update
(``adapters/base.py``, ``docs/architecture.md`` §3 step 10)."""

from __future__ import annotations

import asyncio

from adapters.base import InboundEvent
from tests.gateway.fakes import Step, event
from tests.gateway.harness import ALICE, MALLORY, Gateway, GatewayFactory, with_profile

WAIT = 5.0
SLOW = Step(None, tools=(("slow", {}),))


async def outcome_of(event: InboundEvent) -> bool:
    return await asyncio.wait_for(event.receipt.wait(), WAIT)


async def busy(gw: Gateway) -> InboundEvent:
    """Alice starts a long job; returns its event once its tool runs."""
    first = await gw.say(ALICE, "long job")
    await asyncio.wait_for(gw.tool_started.wait(), WAIT)
    return first


async def test_a_turns_receipt_says_true_once_its_reply_was_sent(
    running: GatewayFactory,
) -> None:
    answer = asyncio.Event()
    async with running(Step("the answer", gate=answer)) as gw:
        said = await gw.say(ALICE, "what is it?")
        await asyncio.wait_for(gw.model.called.wait(), WAIT)
        assert not said.receipt.settled  # the router returned; the turn goes on
        answer.set()
        assert await outcome_of(said) is True
        assert "the answer" in gw.adapter.texts()


async def test_a_command_a_press_and_a_strangers_message_settle_as_the_router_returns(
    running: GatewayFactory,
) -> None:
    async with running() as gw:
        command = await gw.say(ALICE, "/status")
        stranger = await gw.say(MALLORY, "let me in")
        press = event(ALICE, button="ap:gone:a")
        await gw.service.inbound(press)
        settled = [e.receipt.settled for e in (command, stranger, press)]
        assert settled == [True, True, True]
        assert [await outcome_of(e) for e in (command, stranger, press)] == [True, True, True]
        assert gw.model.requests == []


async def test_a_message_folded_into_the_running_turn_settles_at_once(
    running: GatewayFactory,
) -> None:
    async with running(SLOW, Step("done"), profile=with_profile(busy_policy="steer")) as gw:
        first = await busy(gw)
        folded = await gw.say(ALICE, "and use metres")
        assert folded.receipt.settled and await outcome_of(folded) is True
        assert not first.receipt.settled
        gw.gate.set()
        assert await outcome_of(first) is True


async def test_queued_messages_dropped_by_stop_are_handled_for_good(
    running: GatewayFactory,
) -> None:
    async with running(SLOW) as gw:
        first = await busy(gw)
        queued = await gw.say(ALICE, "then this")
        assert not queued.receipt.settled
        await gw.say(ALICE, "/stop")
        assert await outcome_of(queued) is True  # dropped by /stop: never replayed
        assert await outcome_of(first) is True  # stopped, its reply suppressed
        assert len(gw.model.requests) == 1


async def test_a_shutdown_leaves_the_running_and_the_queued_message_unhandled(
    running: GatewayFactory,
) -> None:
    async with running(SLOW) as gw:
        first = await busy(gw)
        queued = await gw.say(ALICE, "then this")
        await gw.service.stop()
        assert (await outcome_of(first), await outcome_of(queued)) == (False, False)
