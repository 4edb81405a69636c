"""End to end: a restart between fetching a message and answering it loses nothing and
answers exactly once."""

from __future__ import annotations

from core.store.sqlite import SqliteStore
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_hang, reply_text
from tests.telegram.harness import GatewayFactory

ANSWER = "Here is the answer, after the restart."


async def answered_once_after_restart(
    gateway: GatewayFactory, sim: TelegramSim, models: ScriptedModelServer, store: SqliteStore
) -> None:
    second_run = await gateway()
    await sim.wait_for_bot_message(ALICE.id, lambda m: m.text == ANSWER)
    await second_run.idle(f"telegram:dm:{ALICE.id}")
    await second_run.adapter.drain()
    assert [m.text for m in sim.bot_messages(ALICE.id)] == [ANSWER]
    assert models.requests[1].messages[-1] == {"role": "user", "content": "what is 6 x 7?"}
    assert await store.unfinished_inbound("telegram") == []


async def test_restart_between_fetch_and_reply_loses_nothing_and_answers_once(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    model_server.script(reply_hang(reply_text("lost in the restart")), reply_text(ANSWER))
    first_run = await gateway()
    said = await telegram_sim.user_says(ALICE.id, "what is 6 x 7?")
    await model_server.wait_for_requests(1)  # fetched, stored, the turn is thinking
    await first_run.stop()
    record = await store.get_inbound("telegram", said.event_id or "")
    assert record is not None and record.state == "processing"
    await answered_once_after_restart(gateway, telegram_sim, model_server, store)


async def test_crash_between_fetch_and_reply_loses_nothing_and_answers_once(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    model_server.script(reply_hang(reply_text("lost in the crash")), reply_text(ANSWER))
    first_run = await gateway()
    said = await telegram_sim.user_says(ALICE.id, "what is 6 x 7?")
    await model_server.wait_for_requests(1)
    await first_run.adapter.stop()  # the process dies: nothing more is received or marked
    first_run.stopping = True
    await first_run.stop()
    update = next(u for u in telegram_sim.updates if u.update_id == int(said.event_id or 0))
    update.confirmed_at = None  # and Telegram never saw the confirming getUpdates
    await answered_once_after_restart(gateway, telegram_sim, model_server, store)
    assert update.deliveries >= 2 and update.confirmed_at is not None
