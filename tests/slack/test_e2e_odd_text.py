"""Odd text from Slack: a lone UTF-16 surrogate (valid JSON, ``"\\ud800"``) in a DM and in a
channel mention is made valid where the payload is read (U+FFFD); both are answered."""

from __future__ import annotations

from tests.platform_sim.slack_sim import ALICE, GENERAL, SlackSim
from tests.slack.conftest import GatewayFactory
from tests.support.model_replies import reply_text
from tests.support.model_server import ScriptedModelServer

LONE, FFFD = "\ud800", "\ufffd"


async def test_a_lone_surrogate_in_a_dm_and_a_channel_mention_is_answered(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("dm answer"), reply_text("channel answer"))
    await slack_gateway("socket")
    dm = slack_sim.dm_channel(ALICE)
    await slack_sim.user_says(dm, f"hi {LONE} there")
    await slack_sim.wait_for_bot_message(dm, lambda m: m.text == "dm answer")
    await slack_sim.user_says(GENERAL, f"{slack_sim.mention} up {LONE}?")
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "channel answer")
    asked = [str(request.messages[-1]) for request in model_server.requests]
    assert f"hi {FFFD} there" in asked[0] and f"up {FFFD}?" in asked[1]
