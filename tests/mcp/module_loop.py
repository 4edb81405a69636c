"""The Telegram end-to-end fixtures on the *module's* event loop, so a module can start its
MCP servers once (a module-scoped fixture) and every test's gateway can call them.

Import them into a test module that sets
``pytestmark = pytest.mark.asyncio(loop_scope="module")``; they are the fixtures of
``tests/platform_sim/pytest_plugin.py``, ``tests/support/fixtures.py`` and
``tests/telegram/conftest.py``, one per test as there, only on the module's loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from core.store.sqlite import SqliteStore, open_store
from tests.platform_sim.pytest_plugin import clear_proxies
from tests.platform_sim.telegram_sim import TelegramSim
from tests.support.model_server import ScriptedModelServer
from tests.telegram.harness import GatewayFactory, gateway_runs

on_module_loop = pytest_asyncio.fixture(loop_scope="module")


@on_module_loop
async def telegram_sim(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[TelegramSim]:
    clear_proxies(monkeypatch)
    sim = TelegramSim()
    await sim.start()
    try:
        yield sim
    finally:
        await sim.stop()
    assert sim.errors == [], f"simulator bugs: {sim.errors}"


@on_module_loop
async def model_server() -> AsyncIterator[ScriptedModelServer]:
    async with ScriptedModelServer() as server:
        yield server


@on_module_loop
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await open_store(tmp_path / "store.db")
    try:
        yield opened
    finally:
        await opened.close()


@on_module_loop
async def gateway(
    telegram_sim: TelegramSim, model_server: ScriptedModelServer, store: SqliteStore,
    tmp_path: Path,
) -> AsyncIterator[GatewayFactory]:  # fmt: skip
    async with gateway_runs(telegram_sim, model_server, store, tmp_path) as start:
        yield start
