"""Exactly one turn per user message: a mention arrives as ``message`` and ``app_mention``,
Slack redelivers envelopes it thinks were not acknowledged, and a forged request is refused
before anything runs."""

from __future__ import annotations

import pytest

from tests.platform_sim.slack_sim import GENERAL, SlackSim
from tests.slack.conftest import GatewayFactory
from tests.slack.harness import MODES, replies_in, texts, thread_key
from tests.support.model_replies import reply_text
from tests.support.model_server import ScriptedModelServer


@pytest.mark.parametrize("mode", MODES)
async def test_a_mention_delivered_as_message_and_app_mention_runs_one_turn(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    mode: str,
) -> None:  # fmt: skip
    model_server.script(reply_text("once"), reply_text("twice?"))
    run = await slack_gateway(mode)
    asked = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} hello")
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "once")
    await run.idle(thread_key(GENERAL, asked.id))
    await slack_sim.wait_for(lambda: not slack_sim.unacked())
    kinds = [e.payload["event"]["type"] for e in slack_sim.envelopes if e.payload.get("event")]
    assert kinds.count("app_mention") == 1
    assert len(model_server.requests) == 1
    assert texts(replies_in(slack_sim, GENERAL, asked.id)) == ["once"]


@pytest.mark.parametrize("mode", MODES)
async def test_an_envelope_not_acked_in_time_and_redelivered_runs_one_turn(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    mode: str,
) -> None:  # fmt: skip
    model_server.script(reply_text("just one"), reply_text("a second turn"))
    run = await slack_gateway(mode)
    slack_sim.ack_timeout = 0.001  # the first envelopes look late: Slack retries them
    asked = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} are you there?")
    first = slack_sim.envelopes[0]
    await slack_sim.wait_for(lambda: first.attempts > 1)
    slack_sim.ack_timeout = 3.0  # (over HTTP it is also the sim's request timeout)
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "just one")
    await run.idle(thread_key(GENERAL, asked.id))
    await slack_sim.wait_for(lambda: first.acked_at is not None)
    assert len(model_server.requests) == 1
    assert texts(replies_in(slack_sim, GENERAL, asked.id)) == ["just one"]


async def test_a_forged_signature_is_refused_with_401_and_runs_nothing(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("must not run"))
    await slack_gateway("http")
    slack_sim.signing_secret = "not-the-apps-secret"
    slack_sim.ack_timeout = 0.05
    await slack_sim.user_says(GENERAL, f"{slack_sim.mention} forged")
    await slack_sim.wait_for(lambda: len(slack_sim.http_deliveries) >= 4)
    assert {status for _, status in slack_sim.http_deliveries} == {401}
    assert model_server.requests == []
    assert slack_sim.bot_messages(GENERAL) == []


async def test_a_request_signed_more_than_five_minutes_ago_is_refused(
    slack_gateway: GatewayFactory, slack_sim: SlackSim
) -> None:
    import time

    from aiohttp import ClientSession

    run = await slack_gateway("http")
    body = '{"type":"event_callback","event":{"type":"message"}}'
    headers = slack_sim.sign(body, int(time.time()) - 301) | {"Content-Type": "application/json"}
    url = run.adapter.http_url
    assert url is not None
    async with ClientSession() as http, http.post(url, data=body, headers=headers) as resp:
        assert resp.status == 401
