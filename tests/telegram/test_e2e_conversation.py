"""End to end: people talk to the agent on Telegram and get answers, in the right sessions."""

from __future__ import annotations

from core.store.sqlite import SqliteStore
from tests.platform_sim.telegram_sim import ALICE, BOB, TelegramSim, TgUser
from tests.support.model_server import ScriptedModelServer, reply_text
from tests.telegram.harness import GatewayFactory, replies

GROUP = -100555


async def test_dm_gets_a_reply(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Hello **Alice**!"))
    await gateway()
    await telegram_sim.user_says(ALICE.id, "hi")
    reply = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "Hello" in m.text)
    assert reply.text == "Hello Alice!"
    assert {"type": "bold", "offset": 6, "length": 5} in reply.raw["entities"]
    [request] = model_server.requests
    assert request.messages[-1] == {"role": "user", "content": "hi"}


async def test_two_users_in_one_group_get_separate_sessions(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    model_server.script(reply_text("Noted, Alice."), reply_text("Hi Bob."))
    run = await gateway()
    telegram_sim.add_group(GROUP)
    await telegram_sim.user_says(GROUP, "@test_bot my secret is 1234", user=ALICE)
    await telegram_sim.wait_for_bot_message(GROUP, lambda m: "Noted" in m.text)
    await telegram_sim.user_says(GROUP, "@test_bot what is Alice's secret?", user=BOB)
    await telegram_sim.wait_for_bot_message(GROUP, lambda m: "Hi Bob" in m.text)
    alice = await store.get_active_session(f"telegram:group:{GROUP}:{ALICE.id}")
    bob = await store.get_active_session(f"telegram:group:{GROUP}:{BOB.id}")
    assert alice is not None and bob is not None and alice.id != bob.id
    bobs_request = model_server.requests[1]
    assert "1234" not in str(bobs_request.messages)
    await run.idle(f"telegram:group:{GROUP}:{BOB.id}")


async def test_forum_topic_members_share_one_session(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    model_server.script(reply_text("Noted."), reply_text("It is 1234."))
    await gateway()
    telegram_sim.add_group(GROUP, "Forum", forum=True)
    await telegram_sim.user_says(GROUP, "@test_bot the code is 1234", user=ALICE, thread=7)
    await telegram_sim.wait_for_bot_message(GROUP, lambda m: "Noted" in m.text)
    await telegram_sim.user_says(GROUP, "@test_bot what is the code?", user=BOB, thread=7)
    answer = await telegram_sim.wait_for_bot_message(GROUP, lambda m: "1234" in m.text)
    assert answer.thread == "7"
    assert "the code is 1234" in str(model_server.requests[1].messages)
    assert await store.get_active_session(f"telegram:thread:{GROUP}:7") is not None


async def test_unknown_user_is_denied_without_a_turn(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    run = await gateway()
    carol = TgUser(99, "Carol", "carol")
    said = await telegram_sim.user_says(carol.id, "let me in", user=carol)
    await telegram_sim.wait_for(lambda: telegram_sim.is_confirmed(int(said.event_id or 0)))
    await run.adapter.drain()
    assert model_server.requests == []
    assert await store.get_active_session(f"telegram:dm:{carol.id}") is None
    assert replies(telegram_sim, carol.id, "") == []
    record = await store.get_inbound("telegram", said.event_id or "")
    assert record is not None and record.state == "done"


async def test_group_text_needs_a_mention_or_a_reply_to_the_bot(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("You called?"), reply_text("Following up."))
    run = await gateway()
    telegram_sim.add_group(GROUP)
    chatter = await telegram_sim.user_says(GROUP, "just chatting with Bob", user=ALICE)
    await telegram_sim.user_says(GROUP, "hey @test_bot", user=ALICE)
    first = await telegram_sim.wait_for_bot_message(GROUP, lambda m: m.text == "You called?")
    await telegram_sim.user_says(GROUP, "and one more thing", user=ALICE, reply_to=first)
    await telegram_sim.wait_for_bot_message(GROUP, lambda m: m.text == "Following up.")
    await run.idle(f"telegram:group:{GROUP}:{ALICE.id}")
    user_turns = [r.messages[-1]["content"] for r in model_server.requests]
    assert user_turns == ["hey @test_bot", "and one more thing"]
    assert chatter.text not in str(model_server.requests[1].messages)


async def test_command_menu_is_published_from_the_router(
    gateway: GatewayFactory, telegram_sim: TelegramSim
) -> None:
    run = await gateway()
    published = [(c["command"], c["description"]) for c in telegram_sim.commands()]
    assert published == [(c.name, c.description) for c in run.service.router.commands]
    assert ("stop", "Stop the current task") in published


async def test_an_update_with_a_malformed_entity_never_blocks_the_next(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Odd one handled."), reply_text("Next one answered."))
    await gateway()
    raw = telegram_sim.new_message(telegram_sim.chat(ALICE.id), ALICE, "😀 hi @test_bot")
    raw["entities"] = [{"type": "mention", "offset": 1, "length": 3}]  # inside the emoji
    telegram_sim.store(ALICE.id, raw)
    await telegram_sim.push_update("message", raw)
    await telegram_sim.user_says(ALICE.id, "a normal message")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Next one answered.")
