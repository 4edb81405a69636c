"""A whole gateway on real parts: SQLite store, CommonAgent, Dispatcher, Approvals, router.

Only the edges are fakes of our own ports: the chat platform (:class:`FakeAdapter`) and
the model (:class:`ScriptedModel`). Tools: ``echo``, ``slow`` (runs until its gate opens),
``danger`` (risk ``dangerous``: a ``pre_tool_call`` hook asks first) and ``clarify``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from adapters.base import InboundEvent
from core.agent.profile import AgentProfile
from core.hooks.registry import HookRegistry
from core.hooks.results import AskUser
from core.store.sqlite import SqliteStore, open_store
from core.tools.base import Tool, ToolContext, ToolRegistry, ToolResult
from core.tools.clarify import clarify_tool
from core.types import ToolSpec
from gateway.control.access import AccessPolicy
from gateway.service import ChatPolicy, Engine, GatewayService, Pacing
from gateway.turns.intake import DEFAULT_ATTACHMENTS, Attachments
from gateway.turns.progress import ProgressConfig
from tests.gateway.fakes import Call, FakeAdapter, FakeClock, Person, ScriptedModel, event

GatewayFactory = Callable[..., AbstractAsyncContextManager["Gateway"]]
"""The ``running`` fixture: ``async with running(Step(...), **options) as gateway``."""

ALICE = Person("1", "Alice")
BOB = Person("2", "Bob")
CAROL = Person("3", "Carol")  # a configured approver
MALLORY = Person("666", "Mallory")  # not on the allowlist
ALL_STEPS = ProgressConfig(mode="all", becomes_reply=False)
"""Progress kept as its own message (finalized), so tests can read it after the reply."""
OBJECT = {"type": "object", "properties": {}}


@dataclass
class Gateway:
    service: GatewayService
    adapter: FakeAdapter
    model: ScriptedModel
    store: SqliteStore
    gate: asyncio.Event
    tool_started: asyncio.Event
    clock: FakeClock
    ran: list[str] = field(default_factory=list)

    async def say(self, who: Person, text: str, **where: Any) -> InboundEvent:
        inbound = event(who, text, **where)
        await self.service.inbound(inbound)
        return inbound

    async def press(self, who: Person, data: str, card: Call) -> Call:
        before = len(self.adapter.of("answer"))
        await self.service.inbound(event(who, button=data, on=card.message))
        await self.adapter.wait_for(lambda: len(self.adapter.of("answer")) > before)
        return self.adapter.of("answer")[before]

    async def idle(self, who: Person = ALICE) -> None:
        key = str(event(who).session_key)
        await asyncio.wait_for(self.service.dispatcher.wait_idle(key), 5)

    async def card(self, nth: int = 0) -> Call:
        await self.adapter.wait_for(lambda: len(self.cards()) > nth)
        return self.cards()[nth]

    async def settled(self, card: Call) -> Call:
        """The first edit of ``card`` (its outcome), once it happens."""
        await self.adapter.wait_for(lambda: bool(self.edits(card)))
        return self.edits(card)[0]

    def edits(self, card: Call) -> list[Call]:
        return [e for e in self.adapter.of("edit") if e.message == card.message]

    def cards(self) -> list[Call]:
        return [
            c for c in self.adapter.of("send") if _card_buttons(c) or "Approval needed" in c.text
        ]


def _card_buttons(call: Call) -> bool:
    """Buttons of an approval card (a progress message carries only its Stop button)."""
    return any(not b.data.startswith("st:") for row in call.buttons for b in row)


def tools(
    gate: asyncio.Event, started: asyncio.Event, ran: list[str], more: Sequence[Tool] = ()
) -> ToolRegistry:
    async def slow(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        started.set()
        await ctx.token.guard(gate.wait())
        ran.append("slow")
        return ToolResult("slow done")

    async def danger(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ran.append(f"danger {args.get('command', '')}")
        return ToolResult("danger done")

    async def echo(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(str(args.get("text", "")))

    return ToolRegistry(
        [
            Tool(ToolSpec("echo", "echoes", OBJECT), echo),
            Tool(ToolSpec("slow", "waits", OBJECT), slow),
            Tool(ToolSpec("danger", "risky", OBJECT, risk="dangerous"), danger),
            clarify_tool(),
            *more,
        ]
    )


def ask_for_dangerous(risk: str, **_: Any) -> AskUser | None:
    return AskUser("This can break things.") if risk == "dangerous" else None


async def build_gateway(
    tmp_path: Path,
    model: ScriptedModel,
    *,
    profile: AgentProfile | None = None,
    access: AccessPolicy | None = None,
    progress: ProgressConfig = ALL_STEPS,
    adapter: FakeAdapter | None = None,
    typing_sleep: Callable[[float], Awaitable[None]] | None = None,
    elsewhere: FakeAdapter | None = None,
    attachments: Attachments = DEFAULT_ATTACHMENTS,
    more_tools: Sequence[Tool] = (),
) -> Gateway:
    """``elsewhere``: a second platform's adapter, where Alice, Bob and Carol (by the same
    ids) may talk too; Carol approves only on ``fake``."""
    clock = FakeClock()
    adapter = adapter or FakeAdapter(clock=clock)
    gate, started = asyncio.Event(), asyncio.Event()
    ran: list[str] = []
    hooks = HookRegistry()
    hooks.register("pre_tool_call", ask_for_dangerous)
    store = await open_store(tmp_path / "gateway.db")
    service = GatewayService(
        Engine(
            store=store,
            model=model,
            tools=tools(gate, started, ran, more_tools),
            hooks=hooks,
            profiles={"default": profile or AgentProfile(workspace=tmp_path)},
        ),
        ChatPolicy(
            access={
                "fake": access or AccessPolicy(allowed_users=frozenset({"1", "2"})),
                "other": AccessPolicy(allowed_users=frozenset({"1", "2", "3"})),
            },
            approvers={"fake": frozenset({"3"})},
            progress=progress,
        ),
        Pacing(clock=clock, sleep=clock.sleep, typing_sleep=typing_sleep or asyncio.sleep),
        adapters=[adapter] + ([elsewhere] if elsewhere else []),
        attachments=attachments,
    )
    await service.start()
    return Gateway(service, adapter, model, store, gate, started, clock, ran)


def with_profile(**changes: Any) -> AgentProfile:
    return replace(AgentProfile(), **changes)
