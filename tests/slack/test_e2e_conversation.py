"""A Slack user reaches the agent: DMs, channel mentions answered in their thread, follow-ups
in that thread without a mention, and silence in threads the agent was never asked into."""

from __future__ import annotations

import pytest

from tests.platform_sim.slack_sim import ALICE, BOB, GENERAL, SlackSim
from tests.slack.conftest import GatewayFactory
from tests.slack.harness import MODES, replies_in, texts, thread_key
from tests.support.model_replies import reply_text
from tests.support.model_server import ScriptedModelServer

pytestmark = pytest.mark.parametrize("mode", MODES)


async def test_a_dm_gets_a_reply(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    mode: str,
) -> None:  # fmt: skip
    model_server.script(reply_text("Hello **Alice**"))
    run = await slack_gateway(mode)
    dm = slack_sim.dm_channel(ALICE)
    await slack_sim.user_says(dm, "hi there")
    reply = await slack_sim.wait_for_bot_message(dm)
    assert reply.text == "Hello *Alice*"
    assert reply.thread is None
    await run.idle(f"slack:dm:{dm}")
    await slack_sim.wait_for(lambda: not slack_sim.unacked())


async def test_a_channel_mention_is_answered_in_its_thread_and_follow_ups_need_no_mention(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    mode: str,
) -> None:  # fmt: skip
    model_server.script(reply_text("first answer"), reply_text("second answer"))
    run = await slack_gateway(mode)
    asked = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} what is up?")
    first = await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "first answer")
    assert first.thread == asked.id
    await run.idle(thread_key(GENERAL, asked.id))
    await slack_sim.user_says(GENERAL, "and then?", user=BOB, thread=asked.id)
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "second answer")
    assert texts(replies_in(slack_sim, GENERAL, asked.id)) == ["first answer", "second answer"]
    assert texts(replies_in(slack_sim, GENERAL, None)) == []
    assert model_server.requests[1].last_user_text == "and then?"


async def test_a_thread_the_agent_never_joined_gets_no_reply_without_a_mention(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    mode: str,
) -> None:  # fmt: skip
    model_server.script(reply_text("only for the mention"))
    run = await slack_gateway(mode)
    other = await slack_sim.user_says(GENERAL, "people talking")
    await slack_sim.user_says(GENERAL, "still talking", thread=other.id)
    asked = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} ping")
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "only for the mention")
    await run.idle(thread_key(GENERAL, asked.id))
    await slack_sim.wait_for(lambda: not slack_sim.unacked())
    assert replies_in(slack_sim, GENERAL, other.id) == []
    assert len(model_server.requests) == 1
