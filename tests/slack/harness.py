"""The whole gateway for Slack end-to-end tests, composed exactly as ``commonos run``
composes it: a ``[slack]`` config section (pointed at the simulator) → the platform
registry's factory → :func:`gateway.wiring.build_service`, with the real slack-bolt, the
scripted model server over HTTP and a real SQLite file.

``mode`` is ``"socket"`` or ``"http"``; in HTTP mode the simulator is told the adapter's
events URL once it listens. ``profile={...}`` adds keys to the default profile,
``sections={"attachments": {...}}`` whole config sections, ``capabilities={...}`` fields of
the adapter's capabilities (its windows). Streamed answers are off unless
a test asks (``streaming="native"``); their pace and the bot's stream window
(``adapters.slack.adapter.STREAM_LIMIT``) are kept on a
:class:`tests.support.clock.TestClock` the simulator's ``Call.at``, channel window and
tiers read too, so no test waits out ``stream_interval`` or a window.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from adapters.base import Adapter
from adapters.slack.adapter import SlackAdapter
from core.model.openai_client import OpenAIClient
from core.store.sqlite import SqliteStore
from gateway.config import parse_config
from gateway.service import GatewayService
from gateway.turns.streaming import Streams
from gateway.wiring import build_service
from tests.platform_sim.base import SimMessage
from tests.platform_sim.slack_sim import ALICE, BOB, SlackSim
from tests.support.clock import TestClock
from tests.support.model_server import ScriptedModelServer

MODES = ("socket", "http")


def slack_config_data(
    sim: SlackSim, models: ScriptedModelServer, mode: str, **slack: Any
) -> dict[str, Any]:
    profile = slack.pop("profile", {})
    sections = slack.pop("sections", {})
    return {
        **sections,
        "model": {"base_url": models.url, "model": "scripted", "api_key": "sk-test"},
        "profiles": {"default": {"sandbox": "none", "approval_timeout": 30, **profile}},
        "progress": {"mode": "all", "cleanup": False},
        "web": {"enabled": False},
        "slack": {
            "bot_token": sim.bot_token,
            "app_token": sim.app_token,
            "signing_secret": "sim-signing-secret",
            "api_base_url": sim.api_url,
            "mode": mode,
            "http_listen": "127.0.0.1:0",
            "edit_interval": 0.05,
            "allowed_users": [ALICE.id, BOB.id],
            "streaming": "off",  # the tests of streamed answers ask for "native" or "edit"
            **slack,
        },
    }


def unwrap(adapter: Adapter) -> SlackAdapter:
    """The service's adapter, as the SlackAdapter it is."""
    assert isinstance(adapter, SlackAdapter)
    return adapter


class SlackGateway:
    """One run of the service with its Slack adapter."""

    def __init__(
        self,
        sim: SlackSim,
        models: ScriptedModelServer,
        store: SqliteStore,
        home: Path,
        mode: str,
        **slack: Any,
    ) -> None:
        self.sim, self.store, self.mode = sim, store, mode
        limits = slack.pop("capabilities", {})
        data = slack_config_data(sim, models, mode, **slack)
        self.config = parse_config(data, None, {"COMMONOS_HOME": str(home)})
        self.model = OpenAIClient(base_url=models.url, model="scripted", trust_env=False)
        self.service: GatewayService = build_service(self.config, store, self.model)
        found = self.service.directory.adapter("slack")
        assert found is not None, "the wiring built no Slack adapter"
        self.adapter = unwrap(found)
        self.clock = TestClock()
        sim.clock = self.clock.now
        self.adapter.capabilities = replace(
            self.adapter.capabilities, pace_clock=self.clock, **limits
        )
        self.service.attach(self.adapter)  # its bot's budget made again, on the test clock
        self.service.streams = Streams(clock=self.clock.now, sleep=self.clock.sleep)

    async def start(self) -> SlackGateway:
        await self.service.start()
        if self.mode == "http":
            self.sim.http_mode(self.adapter.http_url)
        return self

    async def stop(self) -> None:
        await self.service.stop()
        await self.model.aclose()

    async def idle(self, key: str) -> None:
        await asyncio.wait_for(self.service.dispatcher.wait_idle(key), 10)


def thread_key(channel: str, ts: str) -> str:
    return f"slack:thread:{channel}:{ts}"


def replies_in(sim: SlackSim, channel: str, thread: str | None) -> list[SimMessage]:
    """The bot's live messages in ``thread`` (``None``: the channel's top level)."""
    return [m for m in sim.bot_messages(channel) if m.thread == thread and not m.deleted]


def texts(messages: list[SimMessage]) -> list[str]:
    return [m.text for m in messages]


__all__ = ["ALICE", "BOB", "MODES", "SlackGateway", "replies_in", "texts", "thread_key"]
