"""End to end: the draft with its Stop from a turn's first step (issue 28, "Streaming UX"),
and an answer complete before the first draft would go out sent as one message.

Real python-telegram-bot against the simulator, the scripted model server, the terminal
tool blocking on a FIFO (:func:`tests.telegram.test_e2e_stop_steer.tool_gate`: a ``sleep 5``
that ends when the test says so). Where a draft must come back after a card, the stream's
keepalive is off (:func:`without_keepalive`): a draft drawn again was drawn for the change,
at once (paced only by the stream interval), never by a keepalive 20 s later.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from adapters.telegram.adapter import STREAM_KEEPALIVE
from core.store.sqlite import SqliteStore
from gateway.turns.streaming import FIRST_UPDATE_SECONDS, Streams
from tests.platform_sim.telegram_drafts import SimDraft
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_calls
from tests.telegram.harness import Gateway, GatewayFactory
from tests.telegram.test_e2e_approvals import APPROVE, card_in, press
from tests.telegram.test_e2e_stop_steer import last_turn_status, stopped_replies, tool_gate
from tests.telegram.test_e2e_streaming import (
    KEY,
    answered,
    stop_on_the_draft,
    streaming,
    the_next_message_runs,
)


def without_keepalive(run: Gateway) -> None:
    """The bot's streams are never refreshed by a keepalive (``stream_keepalive=None``)."""
    outbound = run.service.directory.outbound("telegram")
    assert outbound is not None and outbound.capabilities.stream_keepalive == STREAM_KEEPALIVE
    outbound.capabilities = replace(outbound.capabilities, stream_keepalive=None)


def live_with(sim: TelegramSim, text: str) -> SimDraft | None:
    """The chat's live draft when it shows ``text``."""
    draft = sim.drafts.live(ALICE.id)
    return draft if draft is not None and text in draft.text else None


async def test_a_first_step_tool_shows_a_draft_with_stop_while_it_runs_and_stop_ends_it(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
    tmp_path: Path,
) -> None:
    async with tool_gate(tmp_path / "workspace") as (command, tool_running):
        model_server.script(reply_tool_calls([("c1", "terminal", {"command": command})]))
        run = await streaming(gateway)
        await telegram_sim.user_says(ALICE.id, "wait on the gate")
        await asyncio.wait_for(asyncio.shield(tool_running), 5)
        draft = await telegram_sim.wait_for(
            lambda: live_with(telegram_sim, "💻 terminal: cat gate")
        )
        assert draft.latest.can_stop and draft.latest.keep_on_stop
        assert not tool_running.result().closed  # the tool still runs: its gate is shut
        await stop_on_the_draft(run, telegram_sim)
    assert len(model_server.requests) == 1
    assert (stopped_replies(telegram_sim), await last_turn_status(store)) == (1, "interrupted")
    await the_next_message_runs(run, telegram_sim, model_server)


async def test_an_approval_shows_in_the_draft_and_after_approve_its_stop_is_back_at_once(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
    tmp_path: Path,
) -> None:
    async with tool_gate(tmp_path / "workspace") as (gate, tool_running):
        command = f"rm -rf ./build; {gate}"
        model_server.script(reply_tool_calls([("c1", "terminal", {"command": command})]))
        run = await streaming(gateway)
        without_keepalive(run)
        await telegram_sim.user_says(ALICE.id, "wipe the build, then wait on the gate")
        card = await card_in(telegram_sim, ALICE.id, "rm -rf ./build")
        card_sent = telegram_sim.calls_to("sendMessage")[-1].at
        waiting = await telegram_sim.wait_for(
            lambda: live_with(telegram_sim, "⚠️ Waiting for approval: terminal")
        )
        assert waiting.latest.can_stop and waiting.latest.at >= card_sent  # after the card
        await press(telegram_sim, card, APPROVE, ALICE)
        await asyncio.wait_for(asyncio.shield(tool_running), 5)
        back = await telegram_sim.wait_for(lambda: live_with(telegram_sim, "💻 terminal: rm -rf"))
        assert back.latest.can_stop and back is waiting  # the same draft, drawn again
        await stop_on_the_draft(run, telegram_sim)
    assert (stopped_replies(telegram_sim), await last_turn_status(store)) == (1, "interrupted")
    await the_next_message_runs(run, telegram_sim, model_server)


class HeldSleep:
    """The streams' sleep, never ending while the test runs: the first draft would go out
    only after the answers are complete."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        await asyncio.Event().wait()


async def test_answers_complete_before_the_first_draft_are_one_message_each_and_no_draft(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    answers = [f"Answer number {n}, complete at once." for n in range(3)]
    model_server.script(*(reply_text(answer) for answer in answers))
    run = await streaming(gateway)
    held = HeldSleep()
    run.service.streams = Streams(clock=run.clock.now, sleep=held)
    for n, answer in enumerate(answers):
        await answered(run, telegram_sim, ALICE.id, f"question {n}", answer)
    assert len(held.asked) == 3 and all(0 < s <= FIRST_UPDATE_SECONDS for s in held.asked)
    assert telegram_sim.calls_to("sendMessageDraft") == []
    sent = [c.params["text"] for c in telegram_sim.calls_to("sendMessage")]
    assert sent == answers
    assert [m.text for m in telegram_sim.bot_messages(ALICE.id)] == answers
    await run.idle(KEY)
