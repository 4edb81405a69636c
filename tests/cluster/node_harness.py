"""Several gateway "processes" in one event loop: each its own PgStore (pool), ClusterNode and
GatewayService, one real PostgreSQL database, one Telegram bot on the simulator (the real
python-telegram-bot adapter, the node's LeasedBot with its relay stage), one scripted model
server (tests/cluster/test_node.py, test_sink.py; docs/cluster.md).

The heartbeat is driven by hand: a node's sleep never ends (:func:`paused`), a test calls
``node.tick()`` when it wants one, so nothing happens behind its back. Each process has a
lease clock of its own (:class:`LeaseClock`) a test moves forward to make its leases look
stale locally (a paused process); on the server a lease is expired with an UPDATE
(:func:`expire_process`).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from adapters.base import Adapter
from adapters.session_keys import session_key
from adapters.telegram import TelegramAdapter
from core.agent.profile import AgentProfile
from core.hooks.builtin import register_builtin_hooks
from core.hooks.registry import HookRegistry
from core.model.openai_client import OpenAIClient
from core.store.postgres import PgStore, open_pg_store
from core.tools.base import ToolRegistry
from gateway.cluster.bots import LeasedBot
from gateway.cluster.node import ClusterNode
from gateway.cluster.relay_stage import bot_lease_name
from gateway.config.sections import ClusterSection
from gateway.control.access import AccessPolicy
from gateway.outbound.pipeline import Outbound
from gateway.service import ChatPolicy, Engine, GatewayService, Pacing
from gateway.turns.progress import ProgressConfig
from tests.platform_sim.telegram_sim import ALICE, BOB, TelegramSim
from tests.support.model_server import ReceivedRequest, Reply, ScriptedModelServer, reply_text
from tests.telegram.harness import MENU, shared_clock, sim_settings

LEASE_SECONDS = 30.0
"""Long enough that no lease ends by itself during a test: tests expire them on purpose."""
ALLOWED = frozenset({str(ALICE.id), str(BOB.id)})
ALICE_KEY = f"telegram:dm:{ALICE.id}"


async def paused(seconds: float) -> None:
    """A heartbeat sleep that never ends: the test ticks by hand."""
    await asyncio.Event().wait()


class LeaseClock:
    """A monotonic clock a test can move forward (``Leases.valid`` reads it)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> float:
        return time.monotonic() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


def echo(request: ReceivedRequest) -> Reply:
    """The model's answer to any request: the user's last words, echoed."""
    users = [m for m in request.messages if m.get("role") == "user"]
    said = str(users[-1].get("content", "")) if users else ""
    return reply_text(f"echo: {said}")


@dataclass
class Process:
    """One gateway process of the test's cluster."""

    name: str
    store: PgStore
    node: ClusterNode
    service: GatewayService
    bot: LeasedBot
    model: OpenAIClient
    clock: LeaseClock
    built: list[TelegramAdapter] = field(default_factory=list)
    stopped: bool = False

    @property
    def outbound(self) -> Outbound:
        """The bot's way out in this process (its fold, with the relay stage)."""
        outbound = self.service.directory.outbound("telegram")
        assert outbound is not None
        return outbound

    @property
    def process_id(self) -> str:
        return self.node.process_id

    async def stop(self, grace: float = 0.5) -> None:
        """A clean stop (SIGTERM): turns get ``grace`` seconds, then the node leaves."""
        if self.stopped:
            return
        self.stopped = True
        await self.service.stop(grace)
        await self.model.aclose()
        await self.store.close()


class Cluster:
    """The processes of one test on one database, simulator and model server."""

    def __init__(self, url: str, sim: TelegramSim, models: ScriptedModelServer, root: Path) -> None:
        self.url, self.sim, self.models, self.root = url, sim, models, root
        self.bot = bot_lease_name("telegram", sim.token)
        self.processes: list[Process] = []
        self.clock = shared_clock(sim, None)

    async def start(
        self, name: str, lease_seconds: float = LEASE_SECONDS, **telegram: Any
    ) -> Process:
        """One more process; ``telegram``: more ``TelegramSettings`` for its bot."""
        process_id = f"{name}/{secrets.token_hex(4)}"
        store = await open_pg_store(self.url, process_id=process_id, pool_size=4)
        clock = LeaseClock()
        section = ClusterSection(lease_seconds=lease_seconds)
        node = ClusterNode(
            store, section, web_url=None, process_id=process_id, sleep=paused, clock=clock.now
        )
        model = OpenAIClient(base_url=self.models.url, model="scripted", trust_env=False)
        workspace = self.root / name
        workspace.mkdir(parents=True, exist_ok=True)
        built: list[TelegramAdapter] = []

        def build() -> Adapter:
            settings = sim_settings(
                self.sim, pace_clock=self.clock, commands=MENU, streaming="off",
                edit_interval=0.05, **telegram,
            )  # fmt: skip
            adapter = TelegramAdapter(self.sim.token, store, settings, key_rule=session_key)
            built.append(adapter)
            return adapter

        service = _service(store, model, workspace)
        [(bot, relay)] = node.lease_bots([build()], {"telegram": build})
        assert isinstance(bot, LeasedBot)
        service.attach(bot, relay)
        service.cluster = node
        await service.start()
        process = Process(name, store, node, service, bot, model, clock, built)
        self.processes.append(process)
        return process

    async def stop(self) -> None:
        for process in reversed(self.processes):
            await process.stop()

    # what the database says ---------------------------------------------------------------
    async def connect(self) -> asyncpg.Connection:
        return await asyncpg.connect(self.url)

    async def fetch(self, sql: str, *args: object) -> list[asyncpg.Record]:
        conn = await self.connect()
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    async def turns(self, session_key: str = ALICE_KEY) -> list[asyncpg.Record]:
        return await self.fetch(
            "SELECT t.id, t.status, t.exit_reason, t.process_id, t.error FROM turns t"
            " JOIN sessions s ON s.id = t.session_id WHERE s.key = $1 ORDER BY t.started_at",
            session_key,
        )

    async def inbound_states(self) -> list[str]:
        rows = await self.fetch("SELECT state FROM inbound WHERE platform = 'telegram'")
        return sorted(str(row["state"]) for row in rows)

    async def expire_process(self, process: Process) -> None:
        """As if ``process`` had been paused past its lease: its leases expired, its last
        beat long ago (the server's view; its own view is unchanged)."""
        conn = await self.connect()
        try:
            await conn.execute(
                "UPDATE leases SET expires_at = clock_timestamp() - interval '1 second'"
                " WHERE owner = $1",
                process.process_id,
            )
            await conn.execute(
                "UPDATE processes SET seen_at = clock_timestamp() - interval '1 hour'"
                " WHERE id = $1",
                process.process_id,
            )
        finally:
            await conn.close()


def _service(store: PgStore, model: OpenAIClient, workspace: Path) -> GatewayService:
    hooks = HookRegistry()
    register_builtin_hooks(hooks)
    profile = AgentProfile(soul="You are a test agent.", workspace=workspace)
    engine = Engine(
        store=store, model=model, tools=ToolRegistry(), hooks=hooks,
        profiles={"default": profile},
    )  # fmt: skip
    chat = ChatPolicy(
        access={"telegram": AccessPolicy(allowed_users=ALLOWED)},
        progress=ProgressConfig(mode="off"),
    )
    return GatewayService(engine, chat, Pacing())
