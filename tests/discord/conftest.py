"""Fixtures for the Discord tests: the whole gateway on the simulator (restartable)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.store.sqlite import SqliteStore
from tests.discord.harness import Gateway, Setup
from tests.platform_sim.discord_sim import DiscordSim
from tests.support.model_server import ScriptedModelServer

GatewayFactory = Callable[..., Awaitable[Gateway]]


@pytest.fixture
async def gateway(
    discord_sim: DiscordSim, model_server: ScriptedModelServer, store: SqliteStore,
    tmp_path: Path,
) -> AsyncIterator[GatewayFactory]:  # fmt: skip
    runs: list[Gateway] = []
    workspace = tmp_path / "workspace"
    workspace.mkdir()

    async def start(**changes: Any) -> Gateway:
        run = Gateway(discord_sim, model_server, store, workspace, replace(Setup(), **changes))
        runs.append(run)
        return await run.start()

    try:
        yield start
    finally:
        for run in runs:
            await run.stop()
