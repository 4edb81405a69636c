"""The whole gateway for Discord end-to-end tests: the real discord.py against the Discord
simulator, the scripted model server, a real SQLite file, composed by ``GatewayService``.

Calling the ``gateway`` fixture again builds another run on the same database and
simulator, as a process restart would.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.discord.adapter import DiscordAdapter, DiscordSettings
from adapters.session_keys import KeyStrategy, key_rule
from core.agent.profile import AgentProfile, BusyPolicy
from core.hooks.builtin import register_builtin_hooks
from core.hooks.registry import HookRegistry
from core.model.openai_client import OpenAIClient
from core.store.sqlite import SqliteStore
from core.tools.base import ToolRegistry
from core.tools.builtin import builtin_tools
from gateway.access import AccessPolicy
from gateway.commands import command_menu
from gateway.progress import ProgressConfig
from gateway.service import ChatPolicy, Engine, GatewayService
from tests.platform_sim.discord_sim import ALICE, BOB, DiscordSim
from tests.support.model_server import ScriptedModelServer

ALLOWED = frozenset({ALICE.id, BOB.id})


@dataclass(frozen=True, slots=True)
class Setup:
    busy_policy: BusyPolicy = "queue"
    approval_timeout: float = 30.0
    edit_interval: float = 0.2
    progress: ProgressConfig = field(default_factory=lambda: ProgressConfig(mode="all"))
    allowed_users: frozenset[str] = ALLOWED
    group_sessions: Any = "per_user"
    settings: dict[str, Any] = field(default_factory=dict)


def sim_settings(sim: DiscordSim, **changes: Any) -> DiscordSettings:
    values: dict[str, Any] = {
        "api_base": sim.api_base,
        "gateway_url": sim.gateway_url,
        "guild_ready_timeout": 0.05,
        "ready_timeout": 5.0,
        "commands": command_menu(),
    }
    return DiscordSettings(**(values | changes))


class Gateway:
    def __init__(
        self, sim: DiscordSim, models: ScriptedModelServer, store: SqliteStore, workspace: Path,
        setup: Setup,
    ) -> None:  # fmt: skip
        self.sim, self.store, self.workspace, self.setup = sim, store, workspace, setup
        self.model = OpenAIClient(base_url=models.url, model="scripted", trust_env=False)
        settings = sim_settings(sim, edit_interval=setup.edit_interval, **setup.settings)
        self.adapter = DiscordAdapter(
            sim.token, store, settings,
            key_rule=key_rule(KeyStrategy(group=setup.group_sessions)),
            update_settled=self._settled,
        )  # fmt: skip
        hooks = HookRegistry()
        register_builtin_hooks(hooks)
        profile = AgentProfile(
            soul="You are a test agent.", workspace=workspace,
            approval_timeout=setup.approval_timeout, busy_policy=setup.busy_policy,
        )  # fmt: skip
        engine = Engine(
            store=store, model=self.model,
            tools=ToolRegistry(builtin_tools(workspace, terminal_timeout=20)), hooks=hooks,
            profiles={"default": profile},
        )  # fmt: skip
        chat = ChatPolicy(
            access={"discord": AccessPolicy(allowed_users=setup.allowed_users)},
            progress=setup.progress,
        )
        self.service = GatewayService(engine, chat, adapters=[self.adapter])
        self.stopped = False

    async def _settled(self, key: str, update_id: str) -> bool:
        return await self.service.update_settled(key, update_id)

    async def start(self) -> Gateway:
        await self.service.start()
        return self

    async def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        await self.service.stop()
        await self.model.aclose()

    async def idle(self, key: str) -> None:
        await asyncio.wait_for(self.service.dispatcher.wait_idle(key), 10)
