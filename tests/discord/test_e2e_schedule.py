"""End to end on Discord (the gateway composed by the wiring, a manual clock): ``/every``
typed in a DM makes a job that runs and answers in that DM; ``/jobs`` shows it (README
"Scheduled turns")."""

from __future__ import annotations

from tests.discord.conftest import GatewayFactory
from tests.platform_sim.discord_sim import ALICE, DiscordSim
from tests.support.model_server import ScriptedModelServer, reply_text
from tests.support.schedule import scheduled


async def test_every_in_a_dm_runs_and_answers_in_that_dm(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Stretch now."))
    run = await gateway()
    feature, clock = await scheduled(run.service)
    dm = discord_sim.dm_channel(ALICE)
    try:
        await discord_sim.user_says(dm, "/every 1h stretch")
        await discord_sim.wait_for_bot_message(dm, lambda m: "next 2027-01-15 09:00" in m.text)
        await clock.advance(3600)
        await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "Stretch now.")
        await feature.scheduler.drain()
        await discord_sim.user_says(dm, "/jobs")
        await discord_sim.wait_for_bot_message(
            dm, lambda m: "last: succeeded, delivery sent" in m.text
        )
    finally:
        await feature.aclose()
