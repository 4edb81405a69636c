"""End to end: the chat's message budget counts messages, not a press's answer
(``answerCallbackQuery``) nor typing (``sendChatAction``), so neither holds a reply.

The chat may take as many messages an hour as the turn sends and not one more, paced on the
real clock (a test clock would skip the hour and hide a reply held behind the budget): the
reply arriving at all shows the answer or the typing took no place in the budget. Nothing
here waits for a window."""

from __future__ import annotations

from adapters.base import RateLimit
from adapters.clock import MONOTONIC
from gateway.turns.progress import ProgressConfig
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call
from tests.telegram.harness import GatewayFactory
from tests.telegram.test_e2e_approvals import DENY, card_in, press, rm_call

NO_PROGRESS = ProgressConfig(mode="off")
TYPING_TURN = 1.2
"""Seconds the model takes on the first step: past the typing delay (1 s)."""


def per_hour(messages: int) -> dict[str, RateLimit | None]:
    return {"chat_limit": RateLimit(messages, 3600.0), "bot_limit": None, "group_limit": None}


def methods(sim: TelegramSim, *names: str) -> list[str]:
    return [c.method for c in sim.calls if c.method in names and c.status == 200]


async def test_the_reply_to_a_press_is_not_held_behind_the_press_answer(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(rm_call("scratch"), reply_text("Left it alone."))
    # two messages an hour: the approval card and the reply
    await gateway(progress=NO_PROGRESS, telegram=per_hour(2), clock=MONOTONIC)
    await telegram_sim.user_says(ALICE.id, "clean the scratch dir")
    card = await card_in(telegram_sim, ALICE.id, "scratch")
    await press(telegram_sim, card, DENY, ALICE)
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Left it alone.")
    assert methods(telegram_sim, "sendMessage", "answerCallbackQuery") == [
        "sendMessage",  # the card
        "answerCallbackQuery",
        "sendMessage",  # the reply, right behind the answer
    ]


async def test_a_tool_turns_reply_is_not_held_by_typing(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("read_file", {"path": "notes.txt"}, delay=TYPING_TURN),
        reply_text("Read them."),
    )
    # one message an hour: the reply
    await gateway(progress=NO_PROGRESS, telegram=per_hour(1), clock=MONOTONIC)
    await telegram_sim.user_says(ALICE.id, "read my notes")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Read them.")
    assert methods(telegram_sim, "sendMessage", "sendChatAction")[:2] == [
        "sendChatAction",  # typing went first, and took no place in the budget
        "sendMessage",
    ]
