"""Fixtures for the Slack end-to-end tests: ``slack_gateway(mode, **slack_keys)`` starts a
gateway run composed by the wiring on the simulator, model server and database; every run
is stopped after the test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from core.store.sqlite import SqliteStore
from tests.platform_sim.slack_sim import SlackSim
from tests.slack.harness import SlackGateway
from tests.support.model_server import ScriptedModelServer

GatewayFactory = Callable[..., Awaitable[SlackGateway]]


@pytest.fixture
async def slack_gateway(
    slack_sim: SlackSim, model_server: ScriptedModelServer, store: SqliteStore, tmp_path: Path
) -> AsyncIterator[GatewayFactory]:
    runs: list[SlackGateway] = []

    async def start(mode: str = "socket", **slack: Any) -> SlackGateway:
        run = SlackGateway(slack_sim, model_server, store, tmp_path, mode, **slack)
        runs.append(run)
        return await run.start()

    try:
        yield start
    finally:
        for run in reversed(runs):
            await run.stop()
