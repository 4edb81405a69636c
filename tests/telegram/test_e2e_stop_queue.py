"""End to end: ``/stop`` says what it ended and what became of the queue, and the model is
called for the queued messages only when ``stop_clears_queue`` keeps them.

A turn blocks on a scripted model that does not answer; two more messages queue behind
it; ``/stop`` ends the turn and, by the profile's setting, drops or keeps the two."""

from __future__ import annotations

import asyncio

import pytest

from gateway.outbound.messages import QUEUED
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
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
UNPACED = {"chat_limit": None, "bot_limit": None, "group_limit": None}
"""No send budget: the notices and answers here would otherwise wait out Telegram's."""
QUEUED_TEXTS = ("two", "three")


def answer(request: ReceivedRequest) -> Reply:
    return reply_text(f"answer: {request.last_user_text}")


async def two_queued_behind_a_hanging_turn(
    gateway: GatewayFactory,
    sim: TelegramSim,
    models: ScriptedModelServer,
    *,
    stop_clears_queue: bool,
) -> Gateway:
    """A turn held in its model call, with two messages queued behind it."""
    models.script(reply_hang(reply_text("never sent"), until=asyncio.Event()), answer, answer)
    run = await gateway(stop_clears_queue=stop_clears_queue, telegram=UNPACED)
    await sim.user_says(ALICE.id, "one")
    await models.wait_for_requests(1, timeout=10)
    for text in QUEUED_TEXTS:
        await sim.user_says(ALICE.id, text)
    await until(lambda: queue_length(run) == len(QUEUED_TEXTS))
    await sim.wait_for_bot_message(ALICE.id, lambda m: QUEUED in m.text)
    return run


def queue_length(run: Gateway) -> int:
    return run.service.dispatcher.status(KEY).queue_length


def bot_texts(sim: TelegramSim, part: str) -> list[str]:
    return [m.text for m in sim.bot_messages(ALICE.id) if part in m.text]


async def stop(sim: TelegramSim) -> str:
    await sim.user_says(ALICE.id, "/stop")
    notice = await sim.wait_for_bot_message(ALICE.id, lambda m: "Stopped" in m.text, timeout=10)
    return notice.text


async def test_stop_names_the_two_queued_messages_it_dropped_and_the_model_never_sees_them(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    run = await two_queued_behind_a_hanging_turn(
        gateway, telegram_sim, model_server, stop_clears_queue=True
    )
    assert await stop(telegram_sim) == "⏹ Stopped. 2 queued messages were not run."
    await run.idle(KEY)
    await telegram_sim.user_says(ALICE.id, "four")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "answer: four")
    assert [r.last_user_text for r in model_server.requests] == ["one", "four"]
    assert not bot_texts(telegram_sim, "answer: t")


async def test_stop_kept_queue_says_the_two_will_run_next_and_the_model_answers_them(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    run = await two_queued_behind_a_hanging_turn(
        gateway, telegram_sim, model_server, stop_clears_queue=False
    )
    assert await stop(telegram_sim) == "⏹ Stopped. 2 queued messages will run next."
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "answer: three")
    await run.idle(KEY)
    assert [r.last_user_text for r in model_server.requests] == ["one", "two", "three"]
    assert bot_texts(telegram_sim, "answer: ") == ["answer: two", "answer: three"]
    assert not bot_texts(telegram_sim, "never sent")


@pytest.mark.parametrize(
    ("queued", "notice"),
    [
        (1, "⏹ Stopped. 1 queued message was not run."),
        (0, "⏹ Stopped."),
    ],
)
async def test_stop_words_one_queued_message_and_none(
    queued: int,
    notice: str,
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
) -> None:
    model_server.script(reply_hang(reply_text("never sent"), until=asyncio.Event()))
    run = await gateway(telegram=UNPACED)
    await telegram_sim.user_says(ALICE.id, "one")
    await model_server.wait_for_requests(1, timeout=10)
    for n in range(queued):
        await telegram_sim.user_says(ALICE.id, f"queued {n}")
    await until(lambda: queue_length(run) == queued)
    assert await stop(telegram_sim) == notice
    await run.idle(KEY)
    await telegram_sim.user_says(ALICE.id, "/stop")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Nothing to stop.")
