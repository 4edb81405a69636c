"""End to end: DMs, channels (per-user sessions), threads (shared), mention → one thread."""

from __future__ import annotations

from core.store.sqlite import SqliteStore
from tests.discord.conftest import GatewayFactory
from tests.platform_sim.discord_sim import ALICE, BOB, GENERAL, DiscordSim
from tests.support.model_server import ScriptedModelServer, reply_text


async def test_a_dm_gets_a_reply(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Hello **Alice**"))
    await gateway()
    dm = discord_sim.dm_channel(ALICE)
    await discord_sim.user_says(dm, "hi")
    reply = await discord_sim.wait_for_bot_message(dm, lambda m: "Hello" in m.text)
    assert reply.text == "Hello **Alice**"
    assert model_server.requests[0].messages[-1]["content"] == "hi"
    sent = discord_sim.calls_to("create_message")[-1]
    assert sent.params["allowed_mentions"] == {"parse": []}


async def test_two_users_in_a_channel_get_separate_sessions_and_a_thread_is_shared(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:  # fmt: skip
    model_server.script(reply_text("one"), reply_text("two"), reply_text("three"),
                        reply_text("four"))  # fmt: skip
    await gateway(thread_per_conversation=False)
    said = [await discord_sim.user_says(GENERAL, f"{discord_sim.mention} first", user=ALICE)]
    await discord_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "one")
    said.append(await discord_sim.user_says(GENERAL, f"{discord_sim.mention} second", user=BOB))
    await discord_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "two")
    thread = await discord_sim.add_thread(GENERAL, "shared")
    said.append(await discord_sim.user_says(GENERAL, f"{discord_sim.mention} a", thread=thread))
    await discord_sim.wait_for_bot_message(thread, lambda m: m.text == "three")
    said.append(await discord_sim.user_says(GENERAL, f"{discord_sim.mention} b", user=BOB,
                                            thread=thread))  # fmt: skip
    await discord_sim.wait_for_bot_message(thread, lambda m: m.text == "four")
    records = [await store.get_inbound("discord", m.id) for m in said]
    keys = [r.session_key for r in records if r is not None]
    assert keys == [f"discord:channel:{GENERAL}:{ALICE.id}", f"discord:channel:{GENERAL}:{BOB.id}",
                    f"discord:thread:{thread.id}", f"discord:thread:{thread.id}"]  # fmt: skip
    assert len(model_server.requests[3].messages) > len(model_server.requests[2].messages)


async def test_a_mention_opens_one_thread_and_follow_ups_need_no_mention(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Started."), reply_text("Continued."))
    await gateway()
    said = await discord_sim.user_says(GENERAL, f"{discord_sim.mention} plan the release notes")
    thread = await discord_sim.wait_for(lambda: discord_sim.channels.get(said.id))
    assert thread.name == "plan the release notes" and thread.owner_id == discord_sim.bot.id
    await discord_sim.wait_for_bot_message(thread.id, lambda m: m.text == "Started.")
    await discord_sim.user_says(GENERAL, "and add the date", thread=thread)
    await discord_sim.wait_for_bot_message(thread.id, lambda m: m.text == "Continued.")
    assert discord_sim.bot_messages(GENERAL) == []
    assert len(discord_sim.calls_to("create_thread")) == 1
    assert model_server.requests[1].messages[-1]["content"] == "and add the date"
