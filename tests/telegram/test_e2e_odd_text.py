"""Odd text from Telegram: a lone UTF-16 surrogate (valid JSON, ``"\\ud800"``) anywhere in an
update is made valid where it enters (U+FFFD), so the turn is answered as any other.

Unrepaired, a surrogate in a group text hid the bot's mention (the entity offsets could
not be read) and the group got nothing; in a chat id it broke the session hash."""

from __future__ import annotations

from core.store.sqlite import SqliteStore
from tests.platform_sim.telegram_sim import ALICE, TelegramSim, TgUser
from tests.support.model_server import ScriptedModelServer, reply_text
from tests.telegram.harness import GatewayFactory

GROUP = -100555
LONE, FFFD = "\ud800", "\ufffd"


async def test_a_lone_surrogate_in_a_dm_is_answered(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Hello"))
    await gateway()
    await telegram_sim.user_says(ALICE.id, f"hi {LONE} there")
    reply = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "Hello" in m.text)
    assert reply.text == "Hello"
    [request] = model_server.requests
    assert request.messages[-1] == {"role": "user", "content": f"hi {FFFD} there"}


async def test_a_lone_surrogate_in_a_group_text_and_names_is_answered(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Hello group"))
    await gateway()
    telegram_sim.add_group(GROUP, f"Te{LONE}am")
    odd_alice = TgUser(ALICE.id, f"Al{LONE}ice", "alice")
    await telegram_sim.user_says(GROUP, f"@test_bot hi {LONE} there", user=odd_alice)
    reply = await telegram_sim.wait_for_bot_message(GROUP, lambda m: "Hello" in m.text)
    assert reply.text == "Hello group"
    assert f"hi {FFFD} there" in str(model_server.requests[0].messages[-1])


async def test_a_lone_surrogate_in_a_chat_id_is_answered(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    model_server.script(reply_text("Hello odd chat"))
    await gateway()
    chat = {"id": f"4{LONE}2", "type": "private", "first_name": "Alice"}
    sender = {"id": ALICE.id, "is_bot": False, "first_name": "Alice"}
    message = {"message_id": 1, "date": 1_700_000_000, "chat": chat, "from": sender}
    await telegram_sim.push_raw({"message": message | {"text": "hi"}})

    sent = await telegram_sim.wait_for(
        lambda: next((c for c in telegram_sim.calls if c.method == "sendMessage"), None)
    )
    assert sent.params["chat_id"] == f"4{FFFD}2"  # the answer, to the repaired id
    assert "Hello odd chat" in sent.params["text"]
    assert await store.get_active_session(f"telegram:dm:4{FFFD}2") is not None
