"""End to end: the interactive ``clarify`` tool asks with one inline button per choice."""

from __future__ import annotations

from tests.platform_sim.telegram_sim import ALICE, BOB, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call
from tests.telegram.harness import GatewayFactory

QUESTION = {"question": "Which environment?", "choices": ["staging", "production"]}


async def test_clarify_choice_is_asked_with_buttons_and_the_press_reaches_the_model(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_tool_call("clarify", QUESTION), reply_text("Deploying to staging."))
    await gateway()
    await telegram_sim.user_says(ALICE.id, "deploy it")
    card = await telegram_sim.wait_for_bot_message(
        ALICE.id, lambda m: "Which environment?" in m.text and bool(m.buttons)
    )
    assert [b.label for b in card.buttons] == ["staging", "production"]
    query = await telegram_sim.press_button(card, card.button("staging").data or "", user=ALICE)
    await telegram_sim.wait_for(lambda: query in telegram_sim.answers)
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Deploying to staging.")
    await telegram_sim.wait_for(lambda: not card.buttons)
    assert "chose: staging" in card.text
    answer = model_server.requests[1].messages[-1]
    assert answer["role"] == "tool" and "staging" in answer["content"]


async def test_clarify_card_refuses_a_press_from_someone_else(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    group = -100777
    telegram_sim.add_group(group)
    model_server.script(reply_tool_call("clarify", QUESTION), reply_text("ok"))
    await gateway()
    await telegram_sim.user_says(group, "@test_bot deploy it", user=ALICE)
    card = await telegram_sim.wait_for_bot_message(group, lambda m: bool(m.buttons))
    query = await telegram_sim.press_button(card, card.button("production").data or "", user=BOB)
    await telegram_sim.wait_for(lambda: query in telegram_sim.answers)
    assert "only the person who asked" in str(telegram_sim.answers[query].get("text", ""))
    assert card.buttons and card.history == []
    assert len(model_server.requests) == 1
