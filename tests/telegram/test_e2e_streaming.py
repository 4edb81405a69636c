"""End to end: an answer streamed on Telegram (docs/architecture.md, "Streaming"), through
the real python-telegram-bot against the simulator and the scripted model server streaming
tokens with gaps.

In a private chat the growing answer is a message draft (``sendMessageDraft`` with
``can_stop``), no faster than once a second, the tool steps inside it, then the answer as
one real message; in a group, or a chat that refuses drafts, one message edited in place.
The draft's Stop (``stopped_message_generation``) ends the running turn as ``/stop`` does.
The pace is measured on the clock the gateway and the simulator share
(:class:`tests.telegram.harness.ScaledClock`: a paced second waits 10 ms).
"""

from __future__ import annotations

import asyncio
import logging
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from core.store.sqlite import SqliteStore
from tests.platform_sim.base import Call
from tests.platform_sim.telegram_drafts import SimDraft
from tests.platform_sim.telegram_sim import ALICE, FloodLimits, TelegramSim
from tests.support.model_server import (
    ReceivedRequest,
    Reply,
    ScriptedModelServer,
    reply_text,
    reply_tool_call,
    reply_tool_calls,
)
from tests.telegram.harness import Gateway, GatewayFactory, ScaledClock
from tests.telegram.test_e2e_stop_steer import last_turn_status, stopped_replies, tool_gate

KEY = f"telegram:dm:{ALICE.id}"
GROUP = -100777
GAP = 0.004
"""Real seconds between two streamed tokens."""
NATIVE: dict[str, Any] = {"streaming": "native"}


def long_answer(words: int) -> str:
    return " ".join(f"word{n:03d}" for n in range(words)) + "."


async def streaming(gateway: GatewayFactory, **changes: Any) -> Gateway:
    return await gateway(clock=ScaledClock(), telegram=NATIVE, stream=True, **changes)


def drafts(sim: TelegramSim) -> list[Call]:
    return [c for c in sim.calls_to("sendMessageDraft") if c.status == 200]


def the_draft(sim: TelegramSim, chat: int = ALICE.id) -> SimDraft:
    (draft,) = sim.drafts.of(chat)
    return draft


async def answered(run: Gateway, sim: TelegramSim, chat: int, text: str, answer: str) -> None:
    """``text`` said in ``chat``; returns once ``answer`` is shown and the turn is over."""
    await sim.user_says(chat, text, user=ALICE)
    await sim.wait_for_bot_message(chat, lambda m: m.text == answer, timeout=10)
    await run.idle(KEY if chat == ALICE.id else f"telegram:group:{chat}:{ALICE.id}")


# a streamed answer ------------------------------------------------------------------------------
async def test_dm_drafts_grow_with_can_stop_at_most_once_a_second_then_one_message(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    answer = long_answer(80)
    model_server.script(reply_text(answer, gap=GAP))
    run = await streaming(gateway)
    await answered(run, telegram_sim, ALICE.id, "tell me a lot", answer)

    draft = the_draft(telegram_sim)
    shown = [v.text for v in draft.versions]
    assert len(set(shown)) >= 3, shown
    assert all(b.startswith(a) for a, b in pairwise(shown)), shown  # growing (or a keepalive)
    assert all(answer.startswith(text) for text in shown)
    assert all(v.can_stop and v.keep_on_stop for v in draft.versions)
    times = [v.at for v in draft.versions]
    assert all(b - a >= 1.0 - 1e-6 for a, b in pairwise(times))
    assert [m.text for m in telegram_sim.bot_messages(ALICE.id)] == [answer]  # once, no dup
    assert draft.state == "dismissed"  # the real message took its place
    final = telegram_sim.calls_to("sendMessage")[-1]
    assert final.at >= times[-1] and final.params["text"] == answer
    assert [c for c in telegram_sim.calls if c.status == 429] == []
    calls = [c for c in telegram_sim.calls if c.method in ("sendMessageDraft", "sendMessage")]
    print(f"\n{len(shown)} drafts + 1 message for an 80-word answer ({len(calls)} calls)")


async def test_a_tool_step_shows_inside_the_draft_and_no_progress_message_is_sent(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("terminal", {"command": "echo checked"}, id="c1"),
        reply_text("It is checked, all good.", gap=GAP),
    )
    run = await streaming(gateway)
    await answered(run, telegram_sim, ALICE.id, "check it", "It is checked, all good.")
    shown = [v.text for v in the_draft(telegram_sim).versions]
    assert any("terminal" in text and "echo checked" in text for text in shown), shown
    assert [m.text for m in telegram_sim.bot_messages(ALICE.id)] == ["It is checked, all good."]
    assert telegram_sim.calls_to("editMessageText") == []


async def test_a_group_gets_one_message_edited_in_place_and_no_draft_call(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    telegram_sim.add_group(GROUP)
    answer = long_answer(60)
    model_server.script(reply_text(answer, gap=GAP))
    run = await streaming(gateway)
    await answered(run, telegram_sim, GROUP, "@test_bot tell me a lot", answer)
    assert telegram_sim.calls_to("sendMessageDraft") == []
    (message,) = telegram_sim.bot_messages(GROUP)
    assert message.text == answer and len(message.history) >= 1  # streamed, then the answer
    edits = [c.at for c in telegram_sim.calls_to("editMessageText")]
    assert all(b - a >= 1.0 - 1e-6 for a, b in pairwise(edits))


async def test_a_refused_draft_falls_back_to_edits_once_and_the_answer_arrives_once(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    telegram_sim.refuse_drafts(ALICE.id)
    first, second = long_answer(40), "And again."
    model_server.script(reply_text(first, gap=GAP), reply_text(second, gap=GAP))
    run = await streaming(gateway)
    with caplog.at_level(logging.INFO, logger="gateway.turns.streaming"):
        await answered(run, telegram_sim, ALICE.id, "tell me", first)
        await answered(run, telegram_sim, ALICE.id, "more", second)
    refused = [c for c in telegram_sim.calls_to("sendMessageDraft") if c.status == 400]
    assert len(refused) == 1 and drafts(telegram_sim) == []  # asked once, remembered
    assert [m.text for m in telegram_sim.bot_messages(ALICE.id)] == [first, second]
    infos = [r for r in caplog.records if "refused a native stream" in r.getMessage()]
    assert len(infos) == 1 and "TEXTDRAFT_PEER_INVALID" in infos[0].getMessage().upper()


# the draft's Stop button ------------------------------------------------------------------------
async def stop_on_the_draft(run: Gateway, sim: TelegramSim) -> None:
    """Press Stop on the live draft: within a second "Stopped" is answered, the turn over."""
    await sim.wait_for(lambda: sim.drafts.live(ALICE.id))
    started = time.monotonic()
    await sim.press_stop(ALICE.id)
    await sim.wait_for_bot_message(ALICE.id, lambda m: "Stopped" in m.text)
    await run.idle(KEY)
    assert time.monotonic() - started < 1.0


async def the_next_message_runs(
    run: Gateway, sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Here I am again."))
    await answered(run, sim, ALICE.id, "are you there?", "Here I am again.")


async def test_stop_on_the_draft_during_the_model_stream_ends_the_turn(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    model_server.script(reply_text(long_answer(30), stall_after=10))
    run = await streaming(gateway)
    await telegram_sim.user_says(ALICE.id, "tell me a lot")
    await telegram_sim.wait_for(lambda: (d := telegram_sim.drafts.live(ALICE.id)) and d.text)
    await stop_on_the_draft(run, telegram_sim)
    assert model_server.requests[0].closed.is_set()
    assert (stopped_replies(telegram_sim), await last_turn_status(store)) == (1, "interrupted")
    kept = [m.text for m in telegram_sim.bot_messages(ALICE.id) if "word000" in m.text]
    assert len(kept) == 1  # keep_on_stop: the partial text stays, once
    await the_next_message_runs(run, telegram_sim, model_server)


async def test_stop_on_the_draft_during_a_tool_ends_the_turn(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
    tmp_path: Path,
) -> None:
    async with tool_gate(tmp_path / "workspace") as (command, tool_running):
        gated = [("c1", "terminal", {"command": command})]
        model_server.script(reply_tool_calls(gated, content="Let me wait on the gate.", gap=GAP))
        run = await streaming(gateway)
        await telegram_sim.user_says(ALICE.id, "wait on the gate")
        await asyncio.wait_for(asyncio.shield(tool_running), 5)
        await stop_on_the_draft(run, telegram_sim)
    shown = [v.text for v in the_draft(telegram_sim).versions]
    # the preamble's words, then (reset: it was a preamble to tool calls) the running tool
    running = "💻 terminal: cat gate"
    assert all(t == running or "Let me wait on the gate.".startswith(t) for t in shown)
    assert len(model_server.requests) == 1
    assert (stopped_replies(telegram_sim), await last_turn_status(store)) == (1, "interrupted")
    await the_next_message_runs(run, telegram_sim, model_server)


async def test_stop_on_the_draft_during_an_approval_ends_the_turn(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    model_server.script(
        reply_tool_call("terminal", {"command": "echo looked"}, id="c1"),
        reply_tool_call("terminal", {"command": "rm -rf ./build"}, id="c2"),
    )
    run = await streaming(gateway)
    await telegram_sim.user_says(ALICE.id, "wipe the build")
    card = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: bool(m.buttons))
    # the card dismissed the draft (the first step's line); it is drawn again at once,
    # saying what it waits for
    await telegram_sim.wait_for(lambda: telegram_sim.drafts.live(ALICE.id))
    shown = [v.text for v in the_draft(telegram_sim).versions]
    assert "💻 terminal: echo looked" in shown
    assert shown[-1] == "⚠️ Waiting for approval: terminal"
    await stop_on_the_draft(run, telegram_sim)
    await telegram_sim.wait_for(lambda: not card.buttons)
    assert "Cancelled" in card.text
    assert await store.pending_approvals() == []
    assert (stopped_replies(telegram_sim), await last_turn_status(store)) == (1, "interrupted")
    await the_next_message_runs(run, telegram_sim, model_server)


async def test_a_stop_for_the_draft_of_an_ended_turn_changes_nothing(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    answer = long_answer(20)
    model_server.script(reply_text(answer, gap=GAP))
    run = await streaming(gateway)
    await answered(run, telegram_sim, ALICE.id, "tell me", answer)
    late = await telegram_sim.stop_update(ALICE.id, the_draft(telegram_sim).draft_id)
    await telegram_sim.wait_for(lambda: telegram_sim.is_confirmed(late.update_id))
    await run.adapter.drain()
    await the_next_message_runs(run, telegram_sim, model_server)
    texts = [m.text for m in telegram_sim.bot_messages(ALICE.id)]
    assert texts == [answer, "Here I am again."]  # no notice, nothing stopped


# load ---------------------------------------------------------------------------------------------
CHATS = 200


def streamed_answer(request: ReceivedRequest) -> Reply:
    return reply_text(f"answer to {request.last_user_text} " + long_answer(6), gap=GAP)


async def test_200_chats_streaming_keep_0_429s_and_each_answer_arrives_once(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    telegram_sim.flood = FloodLimits()  # Telegram's: 20 a second per chat, 30 in all
    chats = [1000 + n for n in range(CHATS)]
    model_server.script(*[streamed_answer] * CHATS)
    await streaming(gateway, allowed_users=frozenset(str(c) for c in chats))
    for chat in chats:
        await telegram_sim.user_says(chat, f"q{chat}")
    expected = {c: f"answer to q{c} " + long_answer(6) for c in chats}

    def all_answered() -> bool:
        return all([m.text for m in telegram_sim.bot_messages(c)] == [expected[c]] for c in chats)

    await telegram_sim.wait_for(all_answered, timeout=60)
    assert [c for c in telegram_sim.calls if c.status == 429] == []
    streamed = [c for c in chats if telegram_sim.drafts.of(c)]
    per_answer = len(telegram_sim.calls_to("sendMessageDraft")) / CHATS
    assert streamed, "no chat was shown a draft"
    for chat in streamed:
        times = [v.at for v in the_draft(telegram_sim, chat).versions]
        assert all(b - a >= 1.0 - 1e-6 for a, b in pairwise(times))
    print(f"\n{CHATS} streamed answers: {per_answer:.2f} drafts + 1 message per answer, "
          f"{len(streamed)} chats shown a draft")  # fmt: skip
