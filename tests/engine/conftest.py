"""A real rig for the turn loop: SQLite store, scripted model server over HTTP, real hooks,
tools and approvals. Only the clock is ours to move (``Rig.clock``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from core.agent.control import TurnControl
from core.agent.loop import CommonAgent
from core.agent.profile import AgentProfile
from core.agent.turn import TurnResult, UserMessage
from core.approvals import Approvals
from core.approver import ApprovalRequest, Decision
from core.hooks.registry import HookRegistry
from core.hooks.spec import HOOK_NAMES
from core.model.openai_client import OpenAIClient
from core.model.retry import RetryPolicy
from core.store.sqlite import SqliteStore
from core.tools.base import Tool, ToolContext, ToolRegistry, ToolResult
from core.types import ToolSpec
from tests.support.model_server import ScriptedModelServer

KEY = "test:dm:1"
USER = "alice"


class FakeClock:
    """A clock the test moves by hand (wall-clock budget, volatile prompt tier)."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class HookLog:
    """Registers a recorder on every hook (first in line) and keeps ``(name, kwargs)``."""

    def __init__(self, hooks: HookRegistry) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        for name in sorted(HOOK_NAMES):
            hooks.register(name, self._recorder(name), priority=0, source="test-log")

    def _recorder(self, name: str) -> Callable[..., None]:
        def record(**kwargs: Any) -> None:
            self.calls.append((name, kwargs))

        return record

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def of(self, name: str) -> list[dict[str, Any]]:
        return [kwargs for called, kwargs in self.calls if called == name]


@dataclass
class Presenter:
    """The approval port as a chat would implement it: records what it was shown."""

    presented: list[ApprovalRequest] = field(default_factory=list)
    settled: list[tuple[ApprovalRequest, Decision]] = field(default_factory=list)
    shown: asyncio.Event = field(default_factory=asyncio.Event)

    async def present(self, request: ApprovalRequest) -> None:
        self.presented.append(request)
        self.shown.set()

    async def settle(self, request: ApprovalRequest, decision: Decision) -> None:
        self.settled.append((request, decision))

    async def next_request(self) -> ApprovalRequest:
        await asyncio.wait_for(self.shown.wait(), 5)
        self.shown.clear()
        return self.presented[-1]


Handler = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]


def make_tool(
    name: str, handler: Handler, *, risk: Any = "safe", interactive: bool = False
) -> Tool:
    parameters = {"type": "object", "properties": {}}
    spec = ToolSpec(name, f"test tool {name}", parameters, risk=risk, interactive=interactive)
    return Tool(spec, handler)


def echo_tool(name: str = "echo") -> Tool:
    async def echo(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(f"echo:{args.get('text', '')}")

    return make_tool(name, echo)


@dataclass
class Rig:
    store: SqliteStore
    server: ScriptedModelServer
    client: OpenAIClient
    hooks: HookRegistry
    log: HookLog
    presenter: Presenter
    approvals: Approvals
    clock: FakeClock
    tools: ToolRegistry
    profile: AgentProfile
    approval_timeout: float = 30.0
    _agent: CommonAgent | None = None

    def agent(self, **profile: Any) -> CommonAgent:
        """The agent (built once; pass profile fields to rebuild with a changed profile)."""
        if self._agent is None or profile:
            self.profile = replace(self.profile, **profile)
            self._agent = CommonAgent(
                self.store,
                self.client,
                self.tools,
                self.hooks,
                self.approvals,
                self.profile,
                clock=self.clock,
                retry=RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0),
            )
        return self._agent

    async def turn(
        self, text: str, *, key: str = KEY, control: TurnControl | None = None, **options: Any
    ) -> TurnResult:
        message = UserMessage(text, sender_id=USER)
        return await self.agent().run_turn(key, message, control or TurnControl(), **options)

    async def stored(self, key: str = KEY) -> list[Any]:
        session = await self.store.get_active_session(key)
        assert session is not None
        return [m.message for m in await self.store.load_active_messages(session.id)]


@pytest.fixture
async def rig(
    store: SqliteStore,
    model_server: ScriptedModelServer,
    tmp_path: Path,
) -> AsyncIterator[Rig]:
    client = OpenAIClient(
        base_url=model_server.url, model="test-model", timeout=5.0, trust_env=False
    )
    hooks = HookRegistry()
    presenter = Presenter()
    approvals = Approvals(store, presenter, timeout=lambda key: built.approval_timeout)
    profile = AgentProfile(
        name="test", model="test-model", soul="You are Test.", workspace=tmp_path
    )
    built = Rig(
        store, model_server, client, hooks, HookLog(hooks), presenter, approvals,
        FakeClock(), ToolRegistry([echo_tool()]), profile,
    )  # fmt: skip
    try:
        yield built
    finally:
        await approvals.aclose()
        await client.aclose()
