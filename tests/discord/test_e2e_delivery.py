"""End to end: long replies chunked with fences intact, no pings, 429s, RESUME replay,
command sync only when changed."""

from __future__ import annotations

from tests.discord.conftest import GatewayFactory
from tests.platform_sim.base import SimError
from tests.platform_sim.discord_sim import ALICE, DiscordSim
from tests.support.model_server import ScriptedModelServer, reply_text


async def test_a_5000_character_reply_arrives_in_valid_chunks_with_the_fence_intact(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    code = "\n".join(f"print({i})  # line {i:04d}" for i in range(200))
    model_server.script(reply_text(f"Here:\n\n```python\n{code}\n```\n\nDone."))
    await gateway()
    dm = discord_sim.dm_channel(ALICE).id
    await discord_sim.user_says(dm, "code please")
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text.endswith("Done."))
    chunks = [m.text for m in discord_sim.bot_messages(dm)]
    assert len(chunks) >= 3 and all(len(c) <= 2000 for c in chunks)
    assert all(c.count("```") % 2 == 0 for c in chunks)
    assert all(c.startswith("```python") for c in chunks[1:-1])
    assert "print(199)" in "".join(chunks)


async def test_everyone_in_model_text_pings_nobody(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Hey @everyone and @here and <@3002>!"))
    await gateway()
    dm = discord_sim.dm_channel(ALICE).id
    await discord_sim.user_says(dm, "ping them")
    await discord_sim.wait_for_bot_message(dm, lambda m: "everyone" in m.text)
    assert discord_sim.calls_to("create_message")[-1].params["allowed_mentions"] == {"parse": []}


async def test_injected_429s_delay_but_lose_and_duplicate_nothing(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("first"), reply_text("second"))
    run = await gateway()
    dm = discord_sim.dm_channel(ALICE).id
    discord_sim.fail_next("create_message", SimError.rate_limit(0.1))
    await discord_sim.user_says(dm, "one")
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "first")
    await discord_sim.user_says(dm, "two")
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "second")
    assert [m.text for m in discord_sim.bot_messages(dm)] == ["first", "second"]
    assert run.adapter.rate_limits == 1


async def test_replayed_events_after_resume_run_no_turn_twice(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("once"), reply_text("after that"))
    run = await gateway()
    dm = discord_sim.dm_channel(ALICE)
    said = await discord_sim.user_says(dm, "hello")
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "once")
    assert await discord_sim.drop_connection("reconnect") == 1
    await discord_sim.wait_for(lambda: discord_sim.gateway.resumes)
    await discord_sim.echo("MESSAGE_CREATE", said.raw, from_user=True)  # replayed by Discord
    await discord_sim.user_says(dm, "after")
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "after that")
    await run.adapter.drain()
    assert [m.text for m in discord_sim.bot_messages(dm)] == ["once", "after that"]
    assert [r.messages[-1]["content"] for r in model_server.requests] == ["hello", "after"]


async def test_commands_are_not_resynced_on_a_restart_with_the_same_set(
    gateway: GatewayFactory, discord_sim: DiscordSim
) -> None:
    first = await gateway()
    await first.stop()
    second = await gateway()
    assert (first.adapter.syncs, second.adapter.syncs) == (1, 0)
    assert len(discord_sim.calls_to("put_commands")) == 1
    assert {c["name"] for c in discord_sim.commands["global"]} >= {"stop", "steer", "approve"}
