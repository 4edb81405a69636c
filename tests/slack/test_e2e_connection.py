"""Slack's Socket Mode connection and its health (docs/architecture.md §10): a reconnection
whose ``apps.connections.open`` fails leaves the platform ``retrying`` and the next attempt
waits the backoff (on an injected sleep); once a socket says ``hello`` it is ``up`` and the
next message is answered."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError

from adapters.slack.receivers import SocketReceiver
from tests.platform_sim.base import SimError
from tests.platform_sim.slack_sim import GENERAL, SlackSim
from tests.slack.conftest import GatewayFactory
from tests.support.backoff import TestSleep
from tests.support.health import health_reaches
from tests.support.model_replies import reply_text
from tests.support.model_server import ScriptedModelServer

WAIT = 10.0


async def test_a_failed_reconnection_is_retrying_and_the_next_one_waits_the_backoff(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("back again"))
    run = await slack_gateway("socket")
    receiver = run.adapter.receiver
    assert isinstance(receiver, SocketReceiver)
    await slack_sim.wait_for(lambda: slack_sim.sockets)
    sleep = receiver.sleep = TestSleep()
    slack_sim.fail_next("apps.connections.open", SimError.server_error(500))
    receiver.watchdog_seconds = 0.0  # the watchdog replaces the connection now
    with pytest.raises(SlackApiError, match="internal_error"):
        await receiver.check()
    health = run.adapter.health
    assert health.state == "retrying" and "apps.connections.open failed" in health.reason
    assert sleep.waits == []  # the first attempt does not wait
    assert await receiver.check() is True
    receiver.watchdog_seconds = 60.0
    assert len(sleep.waits) == 1 and 0.1 <= sleep.waits[0] <= 1.0  # full jitter under 1 s
    await health_reaches(run.adapter, "up")
    asked = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} there?")
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "back again")
    assert asked.id and run.adapter.health.since >= health.since
