"""The dashboard acts on a turn another process runs (gateway/cluster/control.py, issue 23
point 2): two cluster nodes in one event loop (tests/cluster/node_harness.py) on a real
PostgreSQL, the Telegram simulator, the scripted model; A owns the bot, B runs Alice's
session; A's dashboard is served on a real socket and used over HTTP."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from adapters.base import Adapter
from adapters.platforms import RouteHost
from adapters.session_keys import session_key
from adapters.telegram import TelegramAdapter
from core.agent.profile import AgentProfile
from core.hooks.builtin import register_builtin_hooks
from core.hooks.registry import HookRegistry
from core.model.openai_client import OpenAIClient
from core.store.postgres import open_pg_store
from core.tools.base import ToolRegistry
from core.tools.builtin import builtin_tools
from gateway.cluster.bots import LeasedBot
from gateway.cluster.control import CONTROL
from gateway.cluster.node import ClusterNode
from gateway.cluster.sink import session_lease
from gateway.config.sections import ClusterSection
from gateway.control.access import AccessPolicy
from gateway.service import ChatPolicy, Engine, GatewayService, Pacing
from gateway.turns.progress import ProgressConfig
from gateway.web.dashboard import STORE_DOWN, Dashboard
from gateway.web.metrics import GatewayMetrics
from tests.cluster.node_harness import (
    ALICE_KEY,
    ALLOWED,
    LEASE_SECONDS,
    Cluster,
    LeaseClock,
    Process,
    paused,
)
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_hang, reply_text, reply_tool_call
from tests.support.polling import until
from tests.telegram.harness import MENU, replies, sim_settings

OPERATOR = "web:admin"


class ApprovingCluster(Cluster):
    """node_harness's cluster, with the terminal tool (its ``rm -rf`` asks for approval)
    and ``web:admin`` as an operator (the dashboard's ``[approvals] web`` approver)."""

    async def start(
        self, name: str, lease_seconds: float = LEASE_SECONDS, **telegram: Any
    ) -> Process:
        process_id = f"{name}/{secrets.token_hex(4)}"
        store = await open_pg_store(self.url, process_id=process_id, pool_size=4)
        clock = LeaseClock()
        section = ClusterSection(lease_seconds=lease_seconds)
        node = ClusterNode(
            store, section, web_url=None, process_id=process_id, sleep=paused, clock=clock.now
        )
        model = OpenAIClient(base_url=self.models.url, model="scripted", trust_env=False)
        workspace = self.root / name
        (workspace / "scratch").mkdir(parents=True, exist_ok=True)
        built: list[TelegramAdapter] = []

        def build() -> Adapter:
            settings = sim_settings(
                self.sim, pace_clock=self.clock, commands=MENU, streaming="off",
                edit_interval=0.05,
            )  # fmt: skip
            adapter = TelegramAdapter(self.sim.token, store, settings, key_rule=session_key)
            built.append(adapter)
            return adapter

        hooks = HookRegistry()
        register_builtin_hooks(hooks)
        engine = Engine(
            store=store, model=model, hooks=hooks,
            tools=ToolRegistry(builtin_tools(workspace, terminal_timeout=20)),
            profiles={"default": AgentProfile(soul="You are a test agent.", workspace=workspace)},
        )  # fmt: skip
        chat = ChatPolicy(
            access={"telegram": AccessPolicy(allowed_users=ALLOWED)},
            operators=frozenset({OPERATOR}),
            progress=ProgressConfig(mode="off"),
        )
        service = GatewayService(engine, chat, Pacing())
        [(bot, relay)] = node.lease_bots([build()], {"telegram": build})
        assert isinstance(bot, LeasedBot)
        service.attach(bot, relay)
        service.cluster = node
        await service.start()
        process = Process(name, store, node, service, bot, model, clock, built)
        self.processes.append(process)
        return process


class Web:
    """A process's dashboard on a real socket (127.0.0.1), as the operator ``user``."""

    def __init__(self, process: Process, user: str = "admin") -> None:
        host = RouteHost(add_routes=lambda install: None, operator=user, closing=asyncio.Event())
        self.dashboard = Dashboard(process.service, GatewayMetrics(), host)
        app = web.Application()
        self.dashboard.install(app)
        self.server = TestServer(app, host="127.0.0.1")
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Web:
        await self.server.start_server()
        self.session = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.session is not None
        await self.session.close()
        await self.server.close()

    async def post(self, action: str, body: dict[str, str]) -> tuple[int, dict[str, Any]]:
        assert self.session is not None
        url = str(self.server.make_url(f"/api/dashboard/{action}"))
        async with self.session.post(url, json=body) as response:
            return response.status, await response.json()


@pytest.fixture(autouse=True)
def alice_has_started_the_bot(telegram_sim: TelegramSim) -> None:
    telegram_sim.chat(ALICE.id)


@pytest.fixture
async def cluster(
    pg_url: str, telegram_sim: TelegramSim, model_server: ScriptedModelServer, tmp_path: Path
) -> AsyncIterator[Cluster]:
    model_server.default = None
    made = ApprovingCluster(pg_url, telegram_sim, model_server, tmp_path)
    try:
        yield made
    finally:
        await made.stop()


async def a_and_b_running_alice(cluster: Cluster) -> tuple[Process, Process]:
    """A owns the bot; B holds Alice's session, so her turns run on B."""
    a = await cluster.start("a")
    b = await cluster.start("b")
    await a.node.tick()
    assert a.bot.owned and not b.bot.owned
    assert await b.node.leases.acquire(session_lease(ALICE_KEY)) is not None
    return a, b


async def control_mail(cluster: Cluster) -> int:
    [row] = await cluster.fetch("SELECT count(*) AS n FROM cluster_mail WHERE kind = $1", CONTROL)
    return int(row["n"])


async def test_stop_on_the_dashboard_of_a_ends_the_turn_running_on_b_within_a_second(
    cluster: Cluster, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_hang(reply_text("never sent")))
    a, b = await a_and_b_running_alice(cluster)
    await telegram_sim.user_says(ALICE.id, "think hard")
    [request] = await model_server.wait_for_requests(1)
    assert b.service.dispatcher.status(ALICE_KEY).running

    async with Web(a) as dashboard:
        [running] = (await dashboard.dashboard.state())["running"]
        assert (running["session_key"], running["process"]) == (ALICE_KEY, b.process_id)
        started = time.monotonic()
        status, answer = await dashboard.post("stop", {"session_key": ALICE_KEY})
        await b.service.dispatcher.wait_idle(ALICE_KEY)
        took = time.monotonic() - started
    print(f"dashboard Stop on A -> turn on B ended in {took * 1000:.0f} ms")

    assert (status, answer) == (200, {"ok": True, "remote": b.process_id})
    assert took <= 1.0
    assert request.closed.is_set()
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "Stopped" in m.text)
    assert len(replies(telegram_sim, ALICE.id, "Stopped")) == 1
    assert replies(telegram_sim, ALICE.id, "never sent") == []
    [turn] = await cluster.turns()
    assert (turn["status"], turn["process_id"]) == ("interrupted", b.process_id)
    assert b.node.control.received == 1 and not a.service.dispatcher.busy_keys


async def test_steer_on_a_reaches_the_turn_on_b_in_its_next_tool_result(
    cluster: Cluster, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("terminal", {"command": "rm -rf ./scratch"}), reply_text("Cleaned up.")
    )
    a, b = await a_and_b_running_alice(cluster)
    await telegram_sim.user_says(ALICE.id, "clean the scratch dir")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "Approval needed" in m.text)
    [pending] = b.service.approvals.pending()  # the turn on B waits: steer it meanwhile

    async with Web(a) as dashboard:
        status, answer = await dashboard.post(
            "steer", {"session_key": ALICE_KEY, "text": "keep the logs"}
        )
    assert (status, answer) == (200, {"ok": True, "remote": b.process_id})
    await until(lambda: b.node.control.received == 1)  # a steer is applied as it is received
    assert await b.service.approvals.resolve(pending.id, "approved", OPERATOR) == "resolved"
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Cleaned up.")
    [_, second] = model_server.requests
    assert "keep the logs" in str(second.messages[-1]["content"])


async def decide_on_a(
    cluster: Cluster, telegram_sim: TelegramSim, outcome: str
) -> tuple[Process, str, tuple[int, dict[str, Any]]]:
    a, b = await a_and_b_running_alice(cluster)
    await telegram_sim.user_says(ALICE.id, "clean the scratch dir")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "Approval needed" in m.text)
    [pending] = b.service.approvals.pending()
    assert a.service.approvals.pending() == []

    async with Web(a) as dashboard:
        [listed] = (await dashboard.dashboard.state())["approvals"]
        assert (listed["id"], listed["process"]) == (pending.id, b.process_id)
        answer = await dashboard.post("decide", {"approval_id": pending.id, "outcome": outcome})
    return b, pending.id, answer


async def test_approve_on_a_resumes_the_turn_on_b_and_the_store_records_a_s_resolver(
    cluster: Cluster,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    model_server.script(
        reply_tool_call("terminal", {"command": "rm -rf ./scratch"}), reply_text("Cleaned up.")
    )
    b, approval_id, answer = await decide_on_a(cluster, telegram_sim, "approved")

    assert answer == (200, {"result": "resolved"})
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Cleaned up.")
    await b.service.dispatcher.wait_idle(ALICE_KEY)
    record = await b.store.get_approval(approval_id)
    assert record is not None and (record.state, record.resolved_by) == ("approved", OPERATOR)
    assert not (cluster.root / "b" / "scratch").exists()
    [turn] = await cluster.turns()
    assert (turn["status"], turn["process_id"]) == ("completed", b.process_id)
    assert b.node.control.received == 1
    assert "already resolved" not in caplog.text  # the holder's CAS found its own outcome


async def test_deny_on_a_resumes_the_turn_on_b_without_running_the_tool(
    cluster: Cluster, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("terminal", {"command": "rm -rf ./scratch"}), reply_text("Left it.")
    )
    b, approval_id, answer = await decide_on_a(cluster, telegram_sim, "denied")

    assert answer == (200, {"result": "resolved"})
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Left it.")
    await b.service.dispatcher.wait_idle(ALICE_KEY)
    record = await b.store.get_approval(approval_id)
    assert record is not None and (record.state, record.resolved_by) == ("denied", OPERATOR)
    assert (cluster.root / "b" / "scratch").exists()
    [_, second] = model_server.requests
    assert "Not approved" in str(second.messages[-1]["content"])


async def test_a_resolver_who_may_not_approve_is_refused_on_a_and_nothing_is_mailed(
    cluster: Cluster, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("terminal", {"command": "rm -rf ./scratch"}), reply_text("Cleaned up.")
    )
    a, b = await a_and_b_running_alice(cluster)
    await telegram_sim.user_says(ALICE.id, "clean the scratch dir")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "Approval needed" in m.text)
    [pending] = b.service.approvals.pending()

    async with Web(a, user="stranger") as dashboard:
        status, answer = await dashboard.post(
            "decide", {"approval_id": pending.id, "outcome": "approved"}
        )
    assert (status, answer) == (403, {"result": "forbidden"})
    assert await control_mail(cluster) == 0
    record = await b.store.get_approval(pending.id)
    assert record is not None and record.state == "pending"
    assert b.service.approvals.pending() == [pending]
    assert (cluster.root / "b" / "scratch").exists()


async def test_a_control_mail_that_does_not_parse_is_logged_once_and_dropped(
    cluster: Cluster, telegram_sim: TelegramSim, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = await a_and_b_running_alice(cluster)
    with caplog.at_level(logging.WARNING, logger="gateway.cluster.control"):
        await a.node.mailbox.send(b.process_id, CONTROL, '{"action": "reboot"}')
        await a.node.mailbox.send(b.process_id, CONTROL, '{"action": "stop"}')
        await until(lambda: b.node.control.received == 2)
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped) == 2
    assert "expected an object with an action" in dropped[0]
    assert "stop: expected session_key" in dropped[1]
    assert not b.service.dispatcher.busy_keys


async def test_a_store_that_cannot_be_read_shows_this_process_only_and_an_action_is_a_503(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    a, _ = await a_and_b_running_alice(cluster)
    conn = await cluster.connect()
    await conn.execute("ALTER TABLE turns RENAME TO turns_away")
    await conn.execute("ALTER TABLE leases RENAME TO leases_away")
    try:
        async with Web(a) as dashboard:
            with caplog.at_level(logging.WARNING, logger="gateway.web.dashboard"):
                first = await dashboard.dashboard.state()
                second = await dashboard.dashboard.state()
                status, answer = await dashboard.post("stop", {"session_key": ALICE_KEY})
    finally:
        await conn.execute("ALTER TABLE turns_away RENAME TO turns")
        await conn.execute("ALTER TABLE leases_away RENAME TO leases")
        await conn.close()
    assert first["cluster_error"] == second["cluster_error"] == STORE_DOWN
    assert first["running"] == [] and first["approvals"] == []
    shown = [r.getMessage() for r in caplog.records if STORE_DOWN in r.getMessage()]
    assert len(shown) == 1  # once per outage, not at every tick
    assert (status, answer) == (503, {"error": "the store could not be reached; try again"})
    assert cluster.url.split("@")[0] not in caplog.text  # never the store's credentials
    async with Web(a) as dashboard:
        assert "cluster_error" not in await dashboard.dashboard.state()
