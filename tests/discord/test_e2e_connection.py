"""End to end: the gateway connection supervised (adapters/discord/connection.py).

A resumable close is RESUMEd at once and nothing is lost; a connect that fails is retried
on the backoff (a test clock: no real wait) and the session still RESUMEs; a rejected token
or refused intents leave Discord ``down`` with one ERROR naming the fix."""

from __future__ import annotations

import logging

import aiohttp
import pytest

from adapters.discord.connection import FATAL_CLOSES
from gateway.web.compose import web_adapter_of
from tests.discord.conftest import GatewayFactory, beating
from tests.discord.harness import TestClock
from tests.platform_sim.discord_sim import ALICE, DiscordSim
from tests.support.health import health_reaches
from tests.support.model_server import ScriptedModelServer, reply_text


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("code", [4000, 1001, 1011])
async def test_a_resumable_close_is_resumed_at_once_and_the_next_dm_answered(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer,
    code: int,
) -> None:  # fmt: skip
    model_server.script(reply_text("before"), reply_text("after the close"))
    clock = TestClock()
    run = await gateway(timing=clock.timing())
    dm = discord_sim.dm_channel(ALICE)
    await discord_sim.user_says(dm, "hello")
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "before")
    assert await discord_sim.drop_connection("close", code=code) == 1
    await discord_sim.user_says(dm, "still there?")  # while it reconnects: replayed
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "after the close")
    assert len(discord_sim.gateway.identifies) == 1 and len(discord_sim.gateway.resumes) == 1
    assert discord_sim.gateway.accepted == 2
    assert clock.sleeps == []  # no backoff for a resumable close
    assert run.adapter.health.state == "up"


async def test_an_invalidated_session_is_identified_afresh_after_the_spacing(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("in the new session"))
    clock = TestClock()
    run = await gateway(timing=clock.timing())
    await discord_sim.drop_connection("invalid_session")
    await discord_sim.wait_for(lambda: len(discord_sim.gateway.identifies) == 2)
    dm = discord_sim.dm_channel(ALICE)
    await discord_sim.user_says(dm, "hello again")
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "in the new session")
    assert clock.sleeps == [5.0] and discord_sim.gateway.resumes == []
    assert run.adapter.health.state == "up"


async def test_refused_connects_are_retried_on_the_backoff_and_the_session_resumed(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    model_server.script(reply_text("said during the outage, answered after"))
    clock = TestClock()
    run = await gateway(timing=clock.timing())
    seen = []
    clock.on_sleep = lambda: seen.append(run.adapter.health)
    discord_sim.gateway.refuse_connects = 3
    dm = discord_sim.dm_channel(ALICE)
    await discord_sim.drop_connection("close", code=4000)
    await discord_sim.user_says(dm, "are you there?")
    await discord_sim.wait_for_bot_message(dm, lambda m: "outage" in m.text)
    assert [h.state for h in seen] == ["retrying"] * 3
    assert "503" in seen[-1].reason and seen[0].since == seen[-1].since
    assert all(0.1 <= wait <= 2.0**n for n, wait in enumerate(clock.sleeps))
    assert len(discord_sim.gateway.identifies) == 1 and len(discord_sim.gateway.resumes) == 1
    assert run.adapter.health.state == "up"
    assert any("discord: connected again" in r.getMessage() for r in caplog.records)
    assert errors(caplog) == []


async def test_a_gateway_closing_right_after_hello_is_retried_then_up(
    gateway: GatewayFactory, discord_sim: DiscordSim, caplog: pytest.LogCaptureFixture
) -> None:
    clock = TestClock()
    discord_sim.gateway.close_after_hello = [4000, 4000]
    run = await gateway(timing=clock.timing())
    assert run.adapter.health.state == "up"
    assert discord_sim.gateway.accepted == 3  # the first two closed before IDENTIFY was read
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    seen = [w for w in warnings if "reconnecting in" in w]
    assert len(seen) == 2 and "before READY" in seen[0]
    assert 5.0 in clock.sleeps  # Discord's IDENTIFY spacing, on the test clock
    assert errors(caplog) == []


async def test_an_unreadable_ready_ends_that_socket_and_a_fresh_identify_follows(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    model_server.script(reply_text("after a second READY"))
    clock = TestClock()
    discord_sim.gateway.unreadable_ready = 1
    run = await gateway(timing=clock.timing())
    assert run.adapter.health.state == "up"
    assert len(discord_sim.gateway.identifies) == 2 and discord_sim.gateway.resumes == []
    warnings = [r.getMessage() for r in caplog.records if "reconnecting in" in r.getMessage()]
    assert len(warnings) == 1 and "could not read this READY" in warnings[0]
    dm = discord_sim.dm_channel(ALICE)
    await discord_sim.user_says(dm, "hi")
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "after a second READY")
    assert errors(caplog) == []
    # the abandoned socket's heartbeat thread is stopped: only the live socket's beats
    assert run.adapter.client is not None and run.adapter.client.ws is not None
    assert beating() == [run.adapter.client.ws._keep_alive]


@pytest.mark.parametrize("how", ["closed 4004", "resume refused, identify closed 4004"])
async def test_a_rejected_token_is_one_error_and_discord_down(
    gateway: GatewayFactory, discord_sim: DiscordSim, caplog: pytest.LogCaptureFixture,
    how: str,
) -> None:  # fmt: skip
    clock = TestClock()
    run = await gateway(timing=clock.timing())
    discord_sim.reset_token("RESET.IN.THE.PORTAL")
    caplog.clear()
    await discord_sim.drop_connection("close", code=4004 if how == "closed 4004" else 4000)
    await health_reaches(run.adapter, "down")
    assert run.adapter.health.reason == FATAL_CLOSES[4004]
    assert errors(caplog) == [f"discord: down: {FATAL_CLOSES[4004]}"]
    assert "token was rejected" in FATAL_CLOSES[4004] and "Developer Portal" in FATAL_CLOSES[4004]
    connects = discord_sim.gateway.accepted
    await run.stop()
    assert discord_sim.gateway.accepted == connects  # no reconnect after down
    assert run.adapter.health.state == "stopped"


async def test_healthz_is_503_naming_discord_once_it_is_down(
    gateway: GatewayFactory, discord_sim: DiscordSim
) -> None:
    run = await gateway(web={"listen": "127.0.0.1:0"})
    web = web_adapter_of(run.service)
    assert web is not None and web.url is not None
    async with aiohttp.ClientSession() as http:
        async with http.get(web.url.rstrip("/") + "/healthz") as response:
            assert response.status == 200
        discord_sim.reset_token("RESET.IN.THE.PORTAL")
        await discord_sim.drop_connection("close", code=4004)
        await health_reaches(run.adapter, "down")
        async with http.get(web.url.rstrip("/") + "/healthz") as response:
            assert response.status == 503
            body = await response.json()
    assert body["not_ok"] == ["discord"]
    assert body["platforms"]["discord"]["reason"] == FATAL_CLOSES[4004]


async def test_a_token_rejected_at_start_leaves_discord_down_with_the_fix(
    gateway: GatewayFactory, discord_sim: DiscordSim, caplog: pytest.LogCaptureFixture
) -> None:
    run = await gateway(token="NOT.THE.TOKEN", web={"listen": "127.0.0.1:0"})
    assert run.adapter.health.state == "down"
    assert "token was rejected (HTTP 401)" in run.adapter.health.reason
    assert len(errors(caplog)) == 1 and "Developer Portal" in errors(caplog)[0]
    assert discord_sim.gateway.accepted == 0


async def test_a_refused_message_content_intent_at_start_leaves_discord_down_with_the_fix(
    gateway: GatewayFactory, discord_sim: DiscordSim, caplog: pytest.LogCaptureFixture
) -> None:
    discord_sim.privileged_intents = 0
    run = await gateway(web={"listen": "127.0.0.1:0"})
    assert run.adapter.health.state == "down"
    assert run.adapter.health.reason == FATAL_CLOSES[4014]
    assert "message_content = false" in FATAL_CLOSES[4014]
    assert errors(caplog) == [f"discord: down: {FATAL_CLOSES[4014]}"]
