"""Fixtures for the Discord tests: ``gateway(**changes)`` starts a gateway run composed by
the wiring on the simulator, model server and database (``profile={...}``,
``progress={...}`` and ``[discord]`` keys vary the config); every run is stopped after the
test."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from discord.gateway import KeepAliveHandler

from core.store.sqlite import SqliteStore
from tests.discord.harness import Gateway
from tests.platform_sim.discord_sim import DiscordSim
from tests.support.model_server import ScriptedModelServer

GatewayFactory = Callable[..., Awaitable[Gateway]]


@pytest.fixture
async def gateway(
    discord_sim: DiscordSim, model_server: ScriptedModelServer, store: SqliteStore,
    tmp_path: Path,
) -> AsyncIterator[GatewayFactory]:  # fmt: skip
    runs: list[Gateway] = []

    async def start(**changes: Any) -> Gateway:
        run = Gateway(discord_sim, model_server, store, tmp_path, **changes)
        runs.append(run)
        return await run.start()

    try:
        yield start
    finally:
        for run in reversed(runs):
            await run.stop()
        # a heartbeat thread left beating outlives the test's loop and fails a later test
        assert beating() == [], "a discord.py heartbeat thread was left running"


def beating() -> list[threading.Thread]:
    """discord.py heartbeat threads not yet told to stop."""
    return [
        t for t in threading.enumerate()
        if isinstance(t, KeepAliveHandler) and not t._stop_ev.is_set()
    ]  # fmt: skip
