"""End to end: ``debounce_ms`` merges rapid messages into one turn; ``/stop`` never waits.

The profile's ``debounce_ms = 500``; the window is measured on a
:class:`~tests.support.manual_clock.ManualClock` only the test moves, so "100 ms apart"
is exact and costs no real time. Messages go through the Telegram simulator and
python-telegram-bot; the model is the scripted server."""

from __future__ import annotations

from core.debounce import Pace
from core.store.sqlite import SqliteStore
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.manual_clock import ManualClock
from tests.support.model_server import (
    ReceivedRequest,
    Reply,
    ScriptedModelServer,
    reply_hang,
    reply_text,
)
from tests.support.polling import until
from tests.telegram.harness import Gateway, GatewayFactory

KEY = f"telegram:dm:{ALICE.id}"
TEXTS = ("one", "two", "three")


def answer(request: ReceivedRequest) -> Reply:
    return reply_text(f"answer: {request.last_user_text}")


def gathering(run: Gateway) -> int:
    return run.service.dispatcher.status(KEY).gathering


async def three_messages_100ms_apart(run: Gateway, sim: TelegramSim, clock: ManualClock) -> None:
    for count, text in enumerate(TEXTS, start=1):
        if count > 1:
            await clock.advance(0.1)
        await sim.user_says(ALICE.id, text)
        await until(lambda count=count: gathering(run) == count)  # type: ignore[misc]


async def test_three_messages_100ms_apart_are_one_turn_and_none_runs_again_after_a_restart(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(answer, answer)
    clock = ManualClock()
    run = await gateway(debounce_ms=500, debounce=Pace(clock.now, clock.sleep))
    await three_messages_100ms_apart(run, telegram_sim, clock)
    assert not model_server.requests  # the window is still open
    await clock.advance(0.5)
    reply = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "answer" in m.text)
    assert reply.text == "answer: one\ntwo\nthree"
    await run.idle(KEY)
    await run.adapter.drain()
    assert await run.store.unfinished_inbound("telegram") == []  # all three receipts: done
    await run.stop()
    again = await gateway(debounce_ms=500, debounce=Pace(clock.now, clock.sleep))
    await telegram_sim.user_says(ALICE.id, "four")
    await until(lambda: gathering(again) == 1)
    await clock.advance(0.5)
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "answer: four")
    assert [r.last_user_text for r in model_server.requests] == ["one\ntwo\nthree", "four"]
    assert len(telegram_sim.bot_messages(ALICE.id)) == 2  # nothing replayed, nothing queued


async def test_stop_during_the_window_is_not_delayed_and_the_model_sees_nothing(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(answer)
    clock = ManualClock()
    run = await gateway(debounce_ms=500, debounce=Pace(clock.now, clock.sleep))
    await three_messages_100ms_apart(run, telegram_sim, clock)
    await telegram_sim.user_says(ALICE.id, "/stop")  # the clock stays inside the window
    notice = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "Stopped" in m.text)
    assert notice.text == "⏹ Stopped. 3 queued messages were not run."
    await run.idle(KEY)
    await clock.advance(1.0)
    await telegram_sim.user_says(ALICE.id, "four")
    await until(lambda: gathering(run) == 1)
    await clock.advance(0.5)
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "answer: four")
    assert [r.last_user_text for r in model_server.requests] == ["four"]


async def test_a_merged_turn_cut_short_by_a_restart_runs_once_with_its_message_stored_once(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    model_server.script(reply_hang(reply_text("lost in the restart")), answer)
    clock = ManualClock()
    run = await gateway(debounce_ms=500, debounce=Pace(clock.now, clock.sleep))
    await three_messages_100ms_apart(run, telegram_sim, clock)
    await clock.advance(0.5)
    await model_server.wait_for_requests(1)  # the merged turn is thinking
    await run.stop()
    assert len(await store.unfinished_inbound("telegram")) == 3  # all three replay
    again = await gateway(debounce_ms=500, debounce=Pace(clock.now, clock.sleep))
    await until(lambda: gathering(again) == 3 or bool(model_server.requests[1:]))
    await clock.advance(0.5)
    reply = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "answer" in m.text)
    assert reply.text == "answer: one\ntwo\nthree"
    await again.idle(KEY)
    await again.adapter.drain()
    users = [m for m in model_server.requests[1].messages if m["role"] == "user"]
    assert len(users) == 1 and len(model_server.requests) == 2  # stored once, run once
    assert await store.unfinished_inbound("telegram") == []
