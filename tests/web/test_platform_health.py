"""Each platform's connection health, end to end: the real python-telegram-bot and
slack-bolt against the simulators, the gateway composed by the wiring with its web chat,
and what ``/healthz``, ``/metrics`` and the dashboard say (docs/architecture.md §10).

A transient failure (a dropped poll and a 502; a socket Slack closed) is ``retrying`` and
then ``up`` again, and the next message is answered; a token the platform refuses is one
ERROR, ``down`` with the fix, and a 503 naming the platform. The poller's backoff runs on
an injected sleep: no test waits on it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.base import Adapter
from adapters.slack.adapter import SlackAdapter
from adapters.slack.receivers import SocketReceiver
from adapters.telegram import TelegramAdapter
from adapters.telegram.polling import TOKEN_REJECTED
from core.model.demo import DemoModel
from core.store.sqlite import SqliteStore
from gateway.web.compose import web_adapter_of
from gateway.wiring import build_service
from tests.platform_sim.base import SimError
from tests.platform_sim.slack_sim import ALICE as SLACK_ALICE
from tests.platform_sim.slack_sim import SlackSim
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.backoff import Ceiling, TestSleep
from tests.support.health import health_reaches
from tests.web.harness import WAIT, EventStream, Running, close, web_config
from tests.web.test_health_metrics import scrape

GatewayFactory = Callable[..., Awaitable[Running]]


def telegram_section(sim: TelegramSim) -> dict[str, Any]:
    return {
        "telegram": {
            "token": sim.token,
            "base_url": f"{sim.url}/bot",
            "base_file_url": f"{sim.url}/file/bot",
            "allowed_users": [ALICE.id],
        }
    }


def slack_section(sim: SlackSim, **keys: Any) -> dict[str, Any]:
    slack = {
        "bot_token": sim.bot_token,
        "app_token": sim.app_token,
        "api_base_url": sim.api_url,
        "mode": "socket",
        "allowed_users": [SLACK_ALICE.id],
    }
    return {"slack": {**slack, **keys}}


def platform_adapter(adapter: Adapter | None, kind: type[Any]) -> Any:
    """The service's platform adapter, as the ``kind`` it is."""
    assert isinstance(adapter, kind), f"no {kind.__name__} in the service"
    return adapter


@pytest.fixture
async def gateways(tmp_path: Path, store: SqliteStore) -> AsyncIterator[GatewayFactory]:
    """``await gateways(extra, poll_sleep=...)``: the wiring's gateway with its web chat and
    the ``extra`` platforms; ``poll_sleep`` is the Telegram poller's backoff sleep."""
    started: list[Running] = []

    async def make(extra: dict[str, Any], *, poll_sleep: TestSleep | None = None) -> Running:
        service = build_service(web_config(tmp_path, extra), store, DemoModel())
        if poll_sleep is not None:
            telegram = platform_adapter(service.directory.adapter("telegram"), TelegramAdapter)
            poll = replace(
                telegram.settings.poll, backoff_initial=0.05, backoff_max=0.2,
                sleep=poll_sleep, rng=Ceiling(),
            )  # fmt: skip
            telegram.settings = replace(telegram.settings, poll=poll)
        await service.start()
        running = Running(service, web_adapter_of(service), aiohttp.ClientSession(trust_env=False))
        started.append(running)
        return running

    yield make
    for running in reversed(started):
        await close(running)


async def healthz(running: Running) -> tuple[int, dict[str, Any]]:
    async with running.http.get(running.url + "/healthz") as response:
        return response.status, await response.json()


async def dashboard_platforms(running: Running) -> dict[str, Any]:
    """The platforms of the dashboard's first state frame (its Server-Sent Events)."""
    response = await running.http.get(running.url + "/api/dashboard/events")
    stream = EventStream(response)
    stream.start()
    try:
        frame = await stream.wait_for(
            lambda frames: next((f for f in frames if f.kind == "state"), None)
        )
    finally:
        await stream.close()
    assert frame is not None
    platforms: dict[str, Any] = frame.data["platforms"]
    return platforms


def state_of(metrics: dict[Any, float], platform: str) -> dict[str, float]:
    return {
        dict(labels)["state"]: value
        for (name, labels), value in metrics.items()
        if name == "commonos_adapter_state" and dict(labels)["platform"] == platform
    }


def up_of(metrics: dict[Any, float], platform: str) -> float:
    return metrics[("commonos_adapter_up", (("platform", platform),))]


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


# Telegram --------------------------------------------------------------------------------
async def test_telegram_poll_failures_are_retrying_then_up_and_the_next_message_is_answered(
    gateways: GatewayFactory, telegram_sim: TelegramSim
) -> None:
    sleep = TestSleep(held=True)
    running = await gateways(telegram_section(telegram_sim), poll_sleep=sleep)
    telegram = running.service.directory.adapter("telegram")
    assert telegram is not None and telegram.health.state == "up"
    await telegram_sim.wait_for(lambda: telegram_sim.in_flight_polls() == 1)
    telegram_sim.fail_next("getUpdates", SimError.server_error(502))
    assert await telegram_sim.drop_connection() == 1  # the network drops the long poll
    await sleep.wait_for(lambda waits: len(waits) == 1)

    status, body = await healthz(running)
    metrics = await scrape(running)
    assert status == 503 and body["not_ok"] == ["telegram"]
    shown = body["platforms"]["telegram"]
    assert shown["state"] == "retrying" and shown["reason"].startswith("getUpdates failed")
    assert shown["since"].endswith("+00:00") and body["platforms"]["web"]["state"] == "up"
    assert up_of(metrics, "telegram") == 0 and state_of(metrics, "telegram")["retrying"] == 1
    assert (await dashboard_platforms(running))["telegram"]["state"] == "retrying"

    sleep.release()  # the next getUpdates gets the 502, the one after it answers
    await health_reaches(telegram, "up")
    assert sleep.waits == [0.05, 0.1]  # the backoff doubled (its jitter drew the ceiling)
    assert [c.status for c in telegram_sim.calls_to("getUpdates")][:3] == [499, 502, 200]
    await telegram_sim.user_says(ALICE.id, "still there?")
    reply = await telegram_sim.wait_for_bot_message(ALICE.id, timeout=WAIT)
    assert "demo" in reply.text.lower()
    status, body = await healthz(running)
    assert status == 200 and body["platforms"]["telegram"]["state"] == "up"
    assert state_of(await scrape(running), "telegram") == {
        "starting": 0, "up": 1, "retrying": 0, "down": 0, "stopped": 0,
    }  # fmt: skip


async def test_a_revoked_telegram_token_is_one_error_telegram_down_and_a_503_naming_it(
    gateways: GatewayFactory, telegram_sim: TelegramSim, caplog: pytest.LogCaptureFixture
) -> None:
    running = await gateways(telegram_section(telegram_sim))
    telegram = running.service.directory.adapter("telegram")
    assert telegram is not None
    await telegram_sim.wait_for(lambda: telegram_sim.in_flight_polls() == 1)
    old_token = telegram_sim.token
    with caplog.at_level(logging.DEBUG):
        await telegram_sim.revoke_token()
        await health_reaches(telegram, "down")
        status, body = await healthz(running)
        metrics = await scrape(running)
        platforms = await dashboard_platforms(running)
    assert errors(caplog) == [f"telegram: down: {TOKEN_REJECTED}"]
    assert old_token not in caplog.text
    assert status == 503 and body["not_ok"] == ["telegram"]
    assert body["platforms"]["telegram"]["state"] == "down"
    assert body["platforms"]["telegram"]["reason"] == TOKEN_REJECTED
    assert up_of(metrics, "telegram") == 0 and up_of(metrics, "web") == 1
    assert state_of(metrics, "telegram")["down"] == 1
    assert platforms["telegram"] == body["platforms"]["telegram"]
    assert telegram_sim.calls_to("getUpdates")[-1].status == 401  # polling ended there


# Slack ----------------------------------------------------------------------------------
async def test_a_slack_socket_closed_by_slack_is_reopened_and_the_next_dm_is_answered(
    gateways: GatewayFactory, slack_sim: SlackSim, caplog: pytest.LogCaptureFixture
) -> None:
    running = await gateways(slack_section(slack_sim))
    slack = running.service.directory.adapter("slack")
    assert slack is not None and slack.health.state == "up"
    await slack_sim.wait_for(lambda: slack_sim.sockets)
    with caplog.at_level(logging.WARNING):
        assert await slack_sim.close_sockets() == 1  # no disconnect envelope first
        await slack_sim.wait_for(lambda: slack_sim.connections_opened == 2)
        await health_reaches(slack, "up", after="retrying")
    assert slack.health.state == "up"
    dm = slack_sim.dm_channel(SLACK_ALICE)
    await slack_sim.user_says(dm, "are you back?", user=SLACK_ALICE)
    reply = await slack_sim.wait_for_bot_message(dm, timeout=WAIT)
    assert "demo" in reply.text.lower()
    status, body = await healthz(running)
    assert status == 200 and body["platforms"]["slack"]["state"] == "up"


async def test_revoked_slack_tokens_are_one_error_slack_down_and_a_503_naming_slack(
    gateways: GatewayFactory, slack_sim: SlackSim, caplog: pytest.LogCaptureFixture
) -> None:
    running = await gateways(slack_section(slack_sim))
    slack = running.service.directory.adapter("slack")
    assert slack is not None
    await slack_sim.wait_for(lambda: slack_sim.sockets)
    with caplog.at_level(logging.DEBUG):
        await slack_sim.revoke_tokens()
        await slack_sim.close_sockets()  # Slack drops the app's sockets; reopening is refused
        await health_reaches(slack, "down")
        status, body = await healthz(running)
        metrics = await scrape(running)
    receiver = platform_adapter(slack, SlackAdapter).receiver
    assert isinstance(receiver, SocketReceiver) and receiver.client.closed
    [error] = errors(caplog)
    assert "invalid_auth" in error and "[slack] app_token" in error
    assert slack_sim.app_token not in caplog.text
    assert status == 503 and body["not_ok"] == ["slack"]
    assert body["platforms"]["slack"]["state"] == "down"
    assert "apps.connections.open (invalid_auth)" in body["platforms"]["slack"]["reason"]
    assert up_of(metrics, "slack") == 0 and state_of(metrics, "slack")["down"] == 1
    assert await receiver.check() is False  # the watchdog leaves a refused token alone


async def test_a_slack_bot_token_refused_at_start_is_down_and_the_web_chat_runs_on(
    gateways: GatewayFactory, slack_sim: SlackSim, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        running = await gateways(slack_section(slack_sim, bot_token="xoxb-wrong"))
    [error] = errors(caplog)
    assert "auth.test (invalid_auth)" in error and "[slack] bot_token" in error
    assert "slack adapter started" not in caplog.text and "web adapter started" in caplog.text
    assert slack_sim.calls_to("apps.connections.open") == []
    status, body = await healthz(running)
    assert status == 503 and body["not_ok"] == ["slack"]
    assert body["platforms"]["web"]["state"] == "up"
