"""Fixtures for the Telegram tests: a real SQLite store, the adapter pointed at the
simulator, an event sink that records what the adapter delivers, and (end to end) the
whole gateway composed by ``GatewayService``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.telegram import TelegramAdapter, default_session_key
from core.store.sqlite import SqliteStore
from tests.platform_sim.telegram_sim import TelegramSim
from tests.support.model_server import ScriptedModelServer
from tests.telegram.harness import EventLog, GatewayFactory, gateway_runs, sim_settings


@pytest.fixture
def events() -> EventLog:
    return EventLog()


AdapterFactory = Callable[..., Awaitable[TelegramAdapter]]


@pytest.fixture
async def start_adapter(
    telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> AsyncIterator[AdapterFactory]:
    """Start a TelegramAdapter on the simulator; every adapter started is stopped after."""
    started: list[TelegramAdapter] = []

    async def start(
        *,
        sink: Any = None,
        db: Any = None,
        key_rule: Any = default_session_key,
        **changes: Any,
    ) -> TelegramAdapter:
        settings = sim_settings(telegram_sim, **changes)
        adapter = TelegramAdapter(telegram_sim.token, db or store, settings, key_rule)
        started.append(adapter)
        await adapter.start(sink or events)
        return adapter

    try:
        yield start
    finally:
        for adapter in started:
            await adapter.stop()


@pytest.fixture
async def adapter(start_adapter: AdapterFactory) -> TelegramAdapter:
    return await start_adapter()


@pytest.fixture
async def gateway(
    telegram_sim: TelegramSim, model_server: ScriptedModelServer, store: SqliteStore,
    tmp_path: Path,
) -> AsyncIterator[GatewayFactory]:  # fmt: skip
    """Start a gateway run on the shared sim, model server and database; stopped after."""
    async with gateway_runs(telegram_sim, model_server, store, tmp_path) as start:
        yield start
