"""Two real ``commonos run`` processes on one PostgreSQL database and one Discord bot, then
one Slack app (issue 23; docs/cluster.md §3 bot leases, §8 failover), through the real
discord.py and slack-bolt against their simulators, with the scripted model server.

Only the bot's owner holds the Discord gateway connection or the Slack Socket Mode socket
(the simulator never sees two at once), a message is answered once, and when the owner
is killed (SIGKILL) the other process connects and answers the next message.
"""

from __future__ import annotations

from pathlib import Path

from tests.cluster.answers import (
    Answers,
    answer_counts,
    is_answer_to,
)
from tests.cluster.harness import (
    Cluster,
    Peak,
    running_cluster,
)
from tests.cluster.processes import (
    TIMEOUT,
    cluster_config,
    discord_section,
    slack_section,
)
from tests.platform_sim.discord_sim import ALICE as DISCORD_ALICE
from tests.platform_sim.discord_sim import DiscordSim
from tests.platform_sim.slack_sim import ALICE as SLACK_ALICE
from tests.platform_sim.slack_sim import SlackSim
from tests.support.model_server import ScriptedModelServer

BEFORE, AFTER = "plain-before-the-kill", "plain-after-the-kill"


async def two_processes(cluster: Cluster, platform: str) -> str:
    """Start two processes, the second once the first holds the bot; the owner's id."""
    await cluster.prepare("b")  # imports while a starts
    await cluster.start("a")
    owner = await cluster.owner_of(platform)
    await cluster.start("b")
    return owner.process_id


async def test_discord_one_gateway_connection_answered_once_and_the_other_takes_over(
    pg_url: str, discord_sim: DiscordSim, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    Answers(model_server).install(10)
    config = cluster_config(
        pg_url, model_server.url, discord_section(discord_sim, [DISCORD_ALICE.id])
    )
    dm = discord_sim.dm_channel(DISCORD_ALICE)
    live = discord_sim.gateway.live
    async with (
        running_cluster(pg_url, tmp_path, config) as cluster,
        Peak(discord_sim, lambda: len(live())) as connections,
    ):
        owner = await two_processes(cluster, "discord")
        await discord_sim.wait_for(lambda: len(live()) == 1 and live()[0].session, TIMEOUT)
        await discord_sim.user_says(dm, BEFORE)
        await discord_sim.wait_for_bot_message(dm, is_answer_to(BEFORE), timeout=TIMEOUT)

        victim = cluster.by_process_id(owner)
        victim.kill()
        await victim.process.wait()
        taker = await cluster.bot_owner("discord", other_than=owner)
        await discord_sim.wait_for(lambda: len(discord_sim.gateway.identifies) == 2, TIMEOUT)
        await discord_sim.wait_for(lambda: len(live()) == 1 and live()[0].session, TIMEOUT)
        await discord_sim.user_says(dm, AFTER)
        await discord_sim.wait_for_bot_message(dm, is_answer_to(AFTER), timeout=TIMEOUT)
        turns = await cluster.turns()

    assert connections.value == 1, "two processes held a gateway connection at once"
    assert len(discord_sim.gateway.identifies) == 2  # the first owner, then the taker
    assert answer_counts(discord_sim.messages(dm), [BEFORE, AFTER]) == {BEFORE: 1, AFTER: 1}
    assert [t.process_id for t in turns] == [owner, taker.owner]


async def test_slack_one_socket_answered_once_and_the_other_takes_over(
    pg_url: str, slack_sim: SlackSim, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    Answers(model_server).install(10)
    config = cluster_config(pg_url, model_server.url, slack_section(slack_sim, [SLACK_ALICE.id]))
    dm = slack_sim.dm_channel(SLACK_ALICE)

    def live() -> int:
        return sum(1 for socket in slack_sim.sockets if not socket.closed)

    async with (
        running_cluster(pg_url, tmp_path, config) as cluster,
        Peak(slack_sim, live) as sockets,
    ):
        owner = await two_processes(cluster, "slack")
        await slack_sim.user_says(dm, BEFORE)
        await slack_sim.wait_for_bot_message(dm, is_answer_to(BEFORE), timeout=TIMEOUT)

        victim = cluster.by_process_id(owner)
        victim.kill()
        await victim.process.wait()
        await cluster.bot_owner("slack", other_than=owner)
        await slack_sim.user_says(dm, AFTER)  # delivered once the taker's socket is open
        await slack_sim.wait_for_bot_message(dm, is_answer_to(AFTER), timeout=TIMEOUT)

    assert sockets.value == 1, "two processes held a Socket Mode connection at once"
    assert slack_sim.connections_opened == 2  # the first owner, then the taker
    assert answer_counts(slack_sim.messages(dm), [BEFORE, AFTER]) == {BEFORE: 1, AFTER: 1}
