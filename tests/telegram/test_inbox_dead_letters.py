"""Poison updates are quarantined as dead letters and never block the next message."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from core.store.sqlite import SqliteStore
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_text
from tests.telegram.harness import GatewayFactory, replies

MARK = "poison-marker"
HUGE = 2**70


def alice_message(**changes: Any) -> dict[str, Any]:
    """A valid DM from Alice, with ``changes`` applied (``None`` removes a field)."""
    message: dict[str, Any] = {
        "message_id": 900,
        "date": int(time.time()),
        "chat": {"id": ALICE.id, "type": "private", "first_name": "Alice"},
        "from": ALICE.to_json(),
        "text": MARK,
    }
    message.update(changes)
    return {key: value for key, value in message.items() if value is not None}


POISON: dict[str, tuple[dict[str, Any], Any]] = {
    "chat id beyond 64 bits": ({"message": alice_message(chat={"id": HUGE, "type": "dm"})}, None),
    "date beyond 64 bits": ({"message": alice_message(date=HUGE)}, None),
    "update_id beyond 64 bits": ({"message": alice_message()}, HUGE),
    "chat of the wrong type": ({"message": alice_message(chat=MARK)}, None),
    "text of the wrong type": ({"message": alice_message(text=[MARK])}, None),
    "sender of the wrong type": ({"message": alice_message(**{"from": [MARK]})}, None),
    "message of the wrong type": ({"message": MARK}, None),
    "missing date": ({"message": alice_message(date=None)}, None),
    "missing chat": ({"message": alice_message(chat=None)}, None),
    "unknown update type": ({"future_update": {"note": MARK}}, None),
}  # fmt: skip


@pytest.mark.parametrize("name", list(POISON))
async def test_a_poison_update_is_a_dead_letter_and_the_next_message_is_answered(
    name: str,
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fields, update_id = POISON[name]
    model_server.script(reply_text("answered after the poison"))
    await gateway()
    telegram_sim.chat(ALICE.id)
    with caplog.at_level(logging.INFO):
        poison = await telegram_sim.push_raw(fields, update_id=update_id)
        await telegram_sim.user_says(ALICE.id, "an ordinary message")
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "answered" in m.text)
        await telegram_sim.wait_for(lambda: telegram_sim.is_confirmed(poison.update_id))
    [letter] = await store.list_dead_letters("telegram")
    if update_id is None:
        assert letter.item_id == str(poison.update_id)
    else:  # no usable id: kept under a digest of the update
        assert letter.item_id.startswith("unreadable-") and str(update_id) in letter.raw
    assert MARK in letter.raw
    assert letter.error and letter.attempts == 1
    ours = [r for r in caplog.records if r.name.startswith(("adapters", "gateway", "core"))]
    named = [r for r in ours if f"item {letter.item_id} " in r.getMessage()]
    assert [r.levelname for r in named] == ["WARNING"]
    assert len(replies(telegram_sim, ALICE.id, "answered")) == 1
    assert all(m.text != MARK for m in telegram_sim.bot_messages(ALICE.id))


async def test_a_redelivered_poison_update_is_kept_once(
    gateway: GatewayFactory, telegram_sim: TelegramSim, store: SqliteStore,
    model_server: ScriptedModelServer,
) -> None:  # fmt: skip
    model_server.script(reply_text("still answering"))
    await gateway()
    poison = await telegram_sim.push_raw({"message": alice_message(date=None)})
    await telegram_sim.wait_for(lambda: telegram_sim.is_confirmed(poison.update_id) or None)
    await telegram_sim.redeliver(poison.update_id)
    await telegram_sim.user_says(ALICE.id, "hello")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "still answering" in m.text)
    assert poison.deliveries == 2
    assert [d.item_id for d in await store.list_dead_letters()] == [str(poison.update_id)]
