"""End to end: the slow notice says the model is still being waited for (not retrying, on
the first attempt), and it is removed from the chat when the answer comes."""

from __future__ import annotations

import asyncio

from core.model.retry import RetryPolicy
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_hang, reply_text
from tests.telegram.harness import GatewayFactory, replies

KEY = f"telegram:dm:{ALICE.id}"
NOTICE = "⏳ The model"


async def test_the_notice_waits_then_is_removed_when_the_answer_comes(
    telegram_sim: TelegramSim, model_server: ScriptedModelServer, gateway: GatewayFactory
) -> None:
    release = asyncio.Event()
    model_server.script(reply_hang(reply_text("here at last"), until=release))
    run = await gateway(retry=RetryPolicy(max_attempts=3, slow_notice_seconds=0.2))
    await telegram_sim.user_says(ALICE.id, "are you there?")

    notice = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: NOTICE in m.text)
    assert "still waiting" in notice.text and "retrying" not in notice.text
    release.set()

    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "here at last")
    await run.idle(KEY)
    [sent] = replies(telegram_sim, ALICE.id, NOTICE)
    await telegram_sim.wait_for(lambda: sent.deleted)
