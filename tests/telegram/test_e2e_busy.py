"""End to end: a message that arrives while a turn runs — queued, or interrupting."""

from __future__ import annotations

import asyncio

from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_hang, reply_text
from tests.telegram.harness import GatewayFactory, replies

KEY = f"telegram:dm:{ALICE.id}"


async def test_second_message_during_a_turn_is_queued_and_answered_after(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    release = asyncio.Event()
    model_server.script(reply_hang(reply_text("one done"), until=release), reply_text("two done"))
    run = await gateway(busy_policy="queue")
    await telegram_sim.user_says(ALICE.id, "task one")
    await model_server.wait_for_requests(1)
    await telegram_sim.user_says(ALICE.id, "task two")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "Queued" in m.text)
    assert len(model_server.requests) == 1
    release.set()
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "two done")
    await run.idle(KEY)
    texts = [m.text for m in telegram_sim.bot_messages(ALICE.id) if m.text.endswith("done")]
    assert texts == ["one done", "two done"]
    second = model_server.requests[1].messages
    assert [m["content"] for m in second if m["role"] == "user"] == ["task one", "task two"]


async def test_second_message_under_interrupt_policy_interrupts_the_turn(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_hang(reply_text("too late")), reply_text("on it: the new task"))
    run = await gateway(busy_policy="interrupt")
    await telegram_sim.user_says(ALICE.id, "old task")
    [first] = await model_server.wait_for_requests(1)
    await telegram_sim.user_says(ALICE.id, "new task instead")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "new task" in m.text)
    await run.idle(KEY)
    assert first.closed.is_set()  # the hung model call was abandoned, not waited out
    assert replies(telegram_sim, ALICE.id, "too late") == []
    assert replies(telegram_sim, ALICE.id, "Interrupting") != []
    assert model_server.requests[1].messages[-1] == {"role": "user", "content": "new task instead"}
