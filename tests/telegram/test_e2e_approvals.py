"""End to end: dangerous tool calls wait for the requester's press on an approval card."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from core.store.sqlite import SqliteStore
from tests.platform_sim.base import SimMessage
from tests.platform_sim.telegram_sim import ALICE, BOB, CallbackQuery, TelegramSim, TgUser
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call
from tests.telegram.harness import Gateway, GatewayFactory

GROUP = -100900
CAROL = TgUser(99, "Carol", "carol")
APPROVE, DENY = "✅ Approve", "❌ Deny"


def rm_call(target: str, id: str = "call_1") -> Any:
    return reply_tool_call("terminal", {"command": f"rm -rf ./{target}"}, id=id)


async def card_in(sim: TelegramSim, chat: int, target: str) -> SimMessage:
    return await sim.wait_for_bot_message(
        chat, lambda m: "Approval needed" in m.text and target in m.text and m.buttons
    )


async def press(sim: TelegramSim, card: SimMessage, label: str, user: TgUser) -> str:
    """Press and wait for the bot's answer to the callback query; returns the answer text."""
    query_id = await sim.press_button(card, card.button(label).data or "", user=user)
    await sim.wait_for(lambda: query_id in sim.answers)
    return str(sim.answers[query_id].get("text", ""))


async def stale_press(sim: TelegramSim, raw: dict[str, Any], data: str, user: TgUser) -> str:
    """A press on an old copy of a card (a client that had not redrawn it yet)."""
    query = CallbackQuery(str(sim.next_id() + 5000), sim.find_message(GROUP, raw["message_id"]),
                          data, user, time.monotonic())  # type: ignore[arg-type]  # fmt: skip
    sim.queries[query.id] = query
    await sim.push_update("callback_query", {
        "id": query.id, "from": user.to_json(), "message": raw,
        "chat_instance": f"ci{GROUP}", "data": data,
    })  # fmt: skip
    await sim.wait_for(lambda: query.id in sim.answers)
    return str(sim.answers[query.id].get("text", ""))


async def group_gateway(gateway: GatewayFactory, sim: TelegramSim, **changes: Any) -> Gateway:
    sim.add_group(GROUP)
    return await gateway(**changes)


async def test_dangerous_call_waits_for_the_requester_and_refuses_others(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:
    (tmp_path / "workspace" / "scratch").mkdir(parents=True)
    model_server.script(rm_call("scratch"), reply_text("Cleaned up."))
    await group_gateway(gateway, telegram_sim)
    await telegram_sim.user_says(GROUP, "@test_bot clean the scratch dir", user=ALICE)
    card = await card_in(telegram_sim, GROUP, "scratch")
    assert "only the person who asked" in await press(telegram_sim, card, APPROVE, BOB)
    assert "not allowed" in await press(telegram_sim, card, APPROVE, CAROL)
    assert (card.history, len(model_server.requests)) == ([], 1)
    assert await press(telegram_sim, card, APPROVE, ALICE) == ""
    await telegram_sim.wait_for_bot_message(GROUP, lambda m: m.text == "Cleaned up.")
    await telegram_sim.wait_for(lambda: not card.buttons)
    assert "✅ Approved by Alice" in card.text
    assert not (tmp_path / "workspace" / "scratch").exists()
    tool_result = model_server.requests[1].messages[-1]
    assert tool_result["role"] == "tool" and "Not approved" not in tool_result["content"]


async def test_stale_press_on_an_old_card_is_already_decided_and_spares_the_newer_request(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    model_server.script(rm_call("a", "c1"), rm_call("b", "c2"), reply_text("Both removed."))
    await group_gateway(gateway, telegram_sim)
    await telegram_sim.user_says(GROUP, "@test_bot remove a and b", user=ALICE)
    first = await card_in(telegram_sim, GROUP, "./a")
    old_copy, deny_on_old_card = dict(first.raw), first.button(DENY).data or ""
    await press(telegram_sim, first, APPROVE, ALICE)
    second = await card_in(telegram_sim, GROUP, "./b")
    answer = await stale_press(telegram_sim, old_copy, deny_on_old_card, ALICE)
    assert answer == "Already decided."
    [pending] = await store.pending_approvals()
    assert pending.id in str(second.button(APPROVE).data) and second.history == []
    await press(telegram_sim, second, APPROVE, ALICE)
    await telegram_sim.wait_for_bot_message(GROUP, lambda m: m.text == "Both removed.")
    await telegram_sim.wait_for(lambda: all(not c.buttons for c in (first, second)))
    assert "✅ Approved by Alice" in first.text and "✅ Approved by Alice" in second.text


async def test_unanswered_card_expires_and_the_model_hears_timed_out(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(rm_call("logs"), reply_text("Left the logs alone."))
    await gateway(approval_timeout=0.4)
    await telegram_sim.user_says(ALICE.id, "clear the logs")
    card = await card_in(telegram_sim, ALICE.id, "logs")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Left the logs alone.")
    await telegram_sim.wait_for(lambda: not card.buttons)
    assert "Expired" in card.text
    assert "Not approved (timed_out)" in model_server.requests[1].messages[-1]["content"]
