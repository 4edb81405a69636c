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
