"""The whole gateway for Discord end-to-end tests, composed exactly as ``commonos run``
composes it: a ``[discord]`` config section pointing ``api_base`` and ``gateway_url`` at
the simulator → the platform registry's factory (``adapters/discord/platform.py``) →
:func:`gateway.wiring.build_service`, with the real discord.py, the scripted model server
over HTTP and a real SQLite file.

Calling the ``gateway`` fixture again builds another run on the same database, data
directory and simulator, as a process restart would.

The channel budget (sends and edits, ``adapters.discord.adapter.CHANNEL_LIMIT``) and a
streamed answer's edits (``gateway.turns.streaming``) are paced on a
:class:`tests.support.clock.TestClock` the simulator's edit budget shares, so no test
waits for a window and the simulator sees the calls spread as the gateway paced them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from adapters.base import Adapter
from adapters.discord.adapter import DiscordAdapter
from adapters.discord.connection import Timing
from core.model.openai_client import OpenAIClient
from core.store.sqlite import SqliteStore
from core.tools.sandbox import Workspaces
from gateway.config import Config, parse_config
from gateway.service import GatewayService
from gateway.turns.streaming import Streams
from gateway.wiring import build_service
from tests.platform_sim.discord_sim import ALICE, BOB, DiscordSim
from tests.support.clock import TestClock as PaceClock
from tests.support.model_server import ScriptedModelServer

EDIT_INTERVAL = 0.2
STOPPED = "⏹ Stopped."


def discord_config_data(
    sim: DiscordSim,
    models: ScriptedModelServer,
    *,
    profile: dict[str, Any] | None = None,
    progress: dict[str, Any] | None = None,
    web: dict[str, Any] | None = None,
    attachments: dict[str, Any] | None = None,
    transcription: dict[str, Any] | None = None,
    memory: dict[str, Any] | None = None,
    **discord: Any,
) -> dict[str, Any]:
    """The config file's tables; ``discord`` keys override the ``[discord]`` defaults
    (``web={...}`` enables the web server, for ``/healthz``; ``attachments={...}`` and
    ``transcription={...}`` and ``memory={...}`` are those sections, when given)."""
    files = {"attachments": attachments} if attachments is not None else {}
    if transcription is not None:
        files["transcription"] = transcription
    if memory is not None:
        files["memory"] = memory
    return files | {
        "model": {"base_url": models.url, "model": "scripted", "api_key": "sk-test"},
        "profiles": {"default": {"sandbox": "none", "approval_timeout": 30, **(profile or {})}},
        "progress": {"mode": "all", "cleanup": False, **(progress or {})},
        "web": web or {"enabled": False},
        "discord": {
            "token": sim.token,
            "api_base": sim.api_base,
            "gateway_url": sim.gateway_url,
            "edit_interval": EDIT_INTERVAL,
            "allowed_users": [ALICE.id, BOB.id],
            "streaming": "off",  # the tests of streamed answers ask for "native" or "edit"
            **discord,
        },
    }


def shared_clock(sim: DiscordSim) -> PaceClock:
    """The sim's test clock (made on first use, kept across restarts): the gateway paces
    the channel budget on it and the sim measures its edit budget on it."""
    owner = getattr(sim.clock, "__self__", None)
    clock = owner if isinstance(owner, PaceClock) else PaceClock()
    sim.clock = clock.now
    return clock


def unwrap(adapter: Adapter) -> DiscordAdapter:
    """The service's adapter, as the DiscordAdapter it is."""
    assert isinstance(adapter, DiscordAdapter)
    return adapter


class Gateway:
    """One run of the service with its Discord adapter."""

    def __init__(
        self,
        sim: DiscordSim,
        models: ScriptedModelServer,
        store: SqliteStore,
        home: Path,
        timing: Timing | None = None,
        **changes: Any,
    ) -> None:
        self.sim, self.store = sim, store
        data = discord_config_data(sim, models, **changes)
        self.config: Config = parse_config(data, None, {"COMMONOS_HOME": str(home)})
        self.model = OpenAIClient(base_url=models.url, model="scripted", trust_env=False)
        self.service: GatewayService = build_service(self.config, store, self.model)
        found = self.service.directory.adapter("discord")
        assert found is not None, "the wiring built no Discord adapter"
        self.adapter = unwrap(found)
        self.clock = shared_clock(sim)
        self.adapter.capabilities = replace(self.adapter.capabilities, pace_clock=self.clock)
        self.service.attach(self.adapter)  # its bot's budget made again, on the test clock
        self.service.streams = Streams(clock=self.clock.now, sleep=self.clock.sleep)
        if timing is not None:
            self.adapter.timing = timing
        self.stopped = False

    def workspace(self, session_key: str) -> Path:
        """The session's workspace, created (the terminal runs there)."""
        profile = self.config.profile()
        return Workspaces(profile.workspace, profile.workspace_scope).ensure(session_key)

    async def start(self) -> Gateway:
        await self.service.start()
        return self

    async def stop(self) -> None:
        """Stop gracefully: a turn cut short leaves its message to replay next run."""
        if self.stopped:
            return
        self.stopped = True
        await self.service.stop()
        await self.model.aclose()

    async def idle(self, key: str) -> None:
        await asyncio.wait_for(self.service.dispatcher.wait_idle(key), 10)


class TestClock:
    """The reconnects' clock and sleep: a sleep is recorded and passes at once."""

    __test__ = False

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.on_sleep: Callable[[], object] = lambda: None
        """Called at each sleep (the tests record the health there)."""

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.on_sleep()
        self.now += seconds
        await asyncio.sleep(0)

    def timing(self) -> Timing:
        return Timing(clock=self, sleep=self.sleep)


def dm_key(channel: str) -> str:
    return f"discord:dm:{channel}"


__all__ = ["ALICE", "BOB", "EDIT_INTERVAL", "STOPPED", "Gateway", "TestClock", "dm_key",
           "unwrap"]  # fmt: skip
