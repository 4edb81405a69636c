"""Fixtures for the platform simulators: ``telegram_sim``, ``discord_sim``, ``slack_sim``.

Each fixture starts its simulator on 127.0.0.1 in the test's event loop, clears the proxy
environment variables (httpx and slack_sdk would otherwise route loopback through a proxy),
and stops the simulator afterwards. ``discord_sim`` also points discord.py's two process-wide
settings (``discord.http.Route.BASE``, ``DiscordWebSocket.DEFAULT_GATEWAY``) at the simulator
and restores them on teardown.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator

import pytest
import yarl

with warnings.catch_warnings():
    # discord.py imports the stdlib audioop (deprecated in 3.11); filterwarnings=error would
    # turn that import into a collection error for every test module that imports discord
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord.gateway
    import discord.http

from tests.platform_sim.discord_sim import DiscordSim
from tests.platform_sim.slack_sim import SlackSim
from tests.platform_sim.telegram_sim import TelegramSim

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def clear_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def telegram_sim(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[TelegramSim]:
    clear_proxies(monkeypatch)
    sim = TelegramSim()
    await sim.start()
    try:
        yield sim
    finally:
        await sim.stop()
    assert sim.errors == [], f"simulator bugs: {sim.errors}"


@pytest.fixture
async def discord_sim(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[DiscordSim]:
    clear_proxies(monkeypatch)
    sim = DiscordSim()
    await sim.start()
    # process-wide discord.py settings; monkeypatch restores them after the test
    monkeypatch.setattr(discord.http.Route, "BASE", sim.api_base)
    monkeypatch.setattr(
        discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(sim.gateway_url)
    )
    try:
        yield sim
    finally:
        await sim.stop()
    assert sim.errors == [], f"simulator bugs: {sim.errors}"


@pytest.fixture
async def slack_sim(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SlackSim]:
    clear_proxies(monkeypatch)  # slack_sdk honours HTTP(S)_PROXY and ignores NO_PROXY
    sim = SlackSim()
    await sim.start()
    try:
        yield sim
    finally:
        await sim.stop()
    assert sim.errors == [], f"simulator bugs: {sim.errors}"
