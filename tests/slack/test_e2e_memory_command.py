"""``/memory`` on Slack (README "In chat", "Memory"): with ``[memory] enabled`` the command
joins the platform's menu, so Slack's slash command and the typed ``!memory`` reach the
gateway (Slack takes only the commands it was told of)."""

from __future__ import annotations

from tests.platform_sim.slack_sim import ALICE, SlackSim
from tests.slack.conftest import GatewayFactory


async def test_memory_slash_and_typed_command_answer_in_a_dm(
    slack_gateway: GatewayFactory, slack_sim: SlackSim
) -> None:
    await slack_gateway("socket", sections={"memory": {"enabled": True}})
    dm = slack_sim.dm_channel(ALICE)
    await slack_sim.use_command(dm, "/memory", "", user=ALICE)
    first = await slack_sim.wait_for_bot_message(dm, lambda m: "What I remember" in m.text)
    await slack_sim.user_says(dm, "!memory", user=ALICE)
    await slack_sim.wait_for_bot_message(
        dm, lambda m: "What I remember" in m.text and m.id != first.id
    )
