"""End to end: a model that does not answer is never silence. After ``slow_notice_seconds``
the chat hears that the model is not answering (still waiting on the first attempt, retrying
once a retry is under way); when the retries are spent, the final error; ``max_retries``
bounds the requests."""

from __future__ import annotations

import asyncio
import time

from core.model.retry import RetryPolicy
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import (
    Reply,
    ScriptedModelServer,
    reply_error,
    reply_hang,
    reply_text,
)
from tests.telegram.harness import GatewayFactory, replies

KEY = f"telegram:dm:{ALICE.id}"
NOTICE = "⏳ The model"
NOTICE_AFTER = 0.2


def unavailable() -> Reply:
    return reply_error(503, "overloaded", headers={"Retry-After": "0"})


async def test_a_hung_model_gets_a_notice_then_the_final_error_when_retries_are_spent(
    telegram_sim: TelegramSim, model_server: ScriptedModelServer, gateway: GatewayFactory
) -> None:
    release = asyncio.Event()
    model_server.script(reply_hang(unavailable(), until=release), unavailable())
    retry = RetryPolicy(max_attempts=2, base_delay=0.0, slow_notice_seconds=NOTICE_AFTER)
    run = await gateway(retry=retry)
    asked = time.monotonic()

    await telegram_sim.user_says(ALICE.id, "are you there?")

    notice = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: NOTICE in m.text)
    assert time.monotonic() - asked >= NOTICE_AFTER
    assert "still waiting" in notice.text and "retrying" not in notice.text  # attempt 1
    assert len(model_server.requests) == 1  # still the first attempt, hung
    release.set()
    final = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "unavailable" in m.text)
    assert "503" in final.text
    await run.idle(KEY)
    assert len(model_server.requests) == 2
    assert len(replies(telegram_sim, ALICE.id, NOTICE)) == 1


async def test_a_model_that_answers_in_time_gives_no_notice(
    telegram_sim: TelegramSim, model_server: ScriptedModelServer, gateway: GatewayFactory
) -> None:
    model_server.script(reply_text("right here"))
    run = await gateway(retry=RetryPolicy(max_attempts=1, slow_notice_seconds=5.0))

    await telegram_sim.user_says(ALICE.id, "are you there?")

    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "right here")
    await run.idle(KEY)
    assert replies(telegram_sim, ALICE.id, NOTICE) == []


async def test_stop_after_the_notice_ends_the_hung_call(
    telegram_sim: TelegramSim, model_server: ScriptedModelServer, gateway: GatewayFactory
) -> None:
    model_server.script(reply_hang(reply_text("too late")))
    retry = RetryPolicy(max_attempts=1, slow_notice_seconds=NOTICE_AFTER)
    run = await gateway(retry=retry)
    await telegram_sim.user_says(ALICE.id, "are you there?")
    notice = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: NOTICE in m.text)
    assert "still waiting" in notice.text  # no retries configured

    await telegram_sim.user_says(ALICE.id, "/stop")

    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "Stopped" in m.text)
    await run.idle(KEY)
    [request] = model_server.requests
    await asyncio.wait_for(request.closed.wait(), 5)
    assert replies(telegram_sim, ALICE.id, "too late") == []
