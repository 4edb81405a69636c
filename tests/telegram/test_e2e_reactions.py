"""End to end: ``[progress] reactions = true`` marks the user's message 👀 as its turn
starts and ✅ / ❌ as it ends — on Telegram 👍 / 👎, the Bot API's stand-ins — through
python-telegram-bot and the simulator's ``setMessageReaction``; never before the reply is
sent nor in its way (queued at cleanup priority)."""

from __future__ import annotations

from core.debounce import Pace
from gateway.turns.progress import ProgressConfig
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.manual_clock import ManualClock
from tests.support.model_server import ScriptedModelServer, reply_error, reply_text
from tests.support.polling import until
from tests.telegram.harness import GatewayFactory

KEY = f"telegram:dm:{ALICE.id}"
REACTING = ProgressConfig(mode="off", reactions=True)


def reactions_on(sim: TelegramSim, message_id: str) -> list[str]:
    stored = sim.find_message(ALICE.id, int(message_id))
    return list(stored.raw.get("bot_reactions", [])) if stored is not None else []


async def test_a_completed_turn_marks_the_message_working_then_done(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Hello back."))
    run = await gateway(progress=REACTING)
    said = await telegram_sim.user_says(ALICE.id, "hello")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Hello back.")
    await run.idle(KEY)
    await until(lambda: reactions_on(telegram_sim, said.id) == ["👀", "👍"])
    calls = telegram_sim.calls_to("setMessageReaction")
    assert [c.params["message_id"] for c in calls] == [int(said.id)] * 2


async def test_a_failed_turn_ends_with_the_failure_mark_and_commands_get_none(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_error(400, "bad request", type="invalid_request_error"))
    run = await gateway(progress=REACTING)
    said = await telegram_sim.user_says(ALICE.id, "hello")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "could not answer" in m.text)
    await run.idle(KEY)
    await until(lambda: reactions_on(telegram_sim, said.id) == ["👀", "👎"])
    status = await telegram_sim.user_says(ALICE.id, "/status")
    await telegram_sim.wait_for(lambda: len(telegram_sim.bot_messages(ALICE.id)) == 2)
    assert reactions_on(telegram_sim, status.id) == []


async def test_a_merged_turn_marks_every_message_it_holds(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("All three, then."))
    clock = ManualClock()
    run = await gateway(progress=REACTING, debounce_ms=500, debounce=Pace(clock.now, clock.sleep))
    said = []
    for count, text in enumerate(("one", "two", "three"), start=1):
        said.append(await telegram_sim.user_says(ALICE.id, text))
        await until(lambda n=count: run.service.dispatcher.status(KEY).gathering == n)  # type: ignore[misc]
        await clock.advance(0.1)
    await clock.advance(0.5)
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "All three, then.")
    await run.idle(KEY)
    for message in said:
        await until(lambda m=message: reactions_on(telegram_sim, m.id) == ["👀", "👍"])  # type: ignore[misc]
