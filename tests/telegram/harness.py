"""The whole gateway for end-to-end tests: real PTB against the Telegram simulator, the
scripted model server over real HTTP, a real SQLite file, composed by ``GatewayService``.

One :class:`Gateway` is one run of the service; calling the ``gateway`` fixture again
builds another on the same database and simulator, as a process restart would. An update
counts as handled once its own turn's reply went out, unless a stop cut that turn short
(the event's receipt, :class:`adapters.base.Receipt`).

A streamed answer (``gateway.turns.streaming``) is paced on the run's clock: the simulator's
``sim.clock`` sees the drafts spread as the gateway paced them. A streaming test gives a
:class:`ScaledClock` (a second of pacing is 10 ms of waiting), so a draft's keepalive
(20 s) still comes after the drafts that new text asked for.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from adapters.base import InboundEvent
from adapters.clock import PaceClock
from adapters.session_keys import session_key
from adapters.telegram import PollSettings, TelegramAdapter, TelegramSettings
from core.agent.profile import AgentProfile, BusyPolicy
from core.debounce import REAL_TIME, Pace
from core.dispatcher import SHUTDOWN_GRACE_SECONDS
from core.hooks.builtin import register_builtin_hooks
from core.hooks.registry import HookRegistry
from core.model.openai_client import OpenAIClient
from core.model.retry import RetryPolicy
from core.store.sqlite import SqliteStore
from core.tools.base import ToolRegistry
from core.tools.builtin import builtin_tools
from core.tools.sandbox import NoSandbox
from gateway.config.memory import MemorySection
from gateway.control.access import AccessPolicy
from gateway.control.memory import MemoryFeature
from gateway.control.syntax import command_menu
from gateway.service import ChatPolicy, Engine, GatewayService, Pacing
from gateway.turns.intake import DEFAULT_ATTACHMENTS, Attachments
from gateway.turns.progress import ProgressConfig
from gateway.turns.streaming import Streams
from tests.platform_sim.base import SimMessage
from tests.platform_sim.telegram_sim import ALICE, BOB, TelegramSim
from tests.support.clock import TestClock
from tests.support.model_server import ScriptedModelServer

T = TypeVar("T")


class EventLog:
    """An event sink that records events; ``gate`` (when set) holds every delivery open."""

    def __init__(self) -> None:
        self.events: list[InboundEvent] = []
        self.gate: asyncio.Event | None = None
        self._changed = asyncio.Condition()

    async def __call__(self, event: InboundEvent) -> None:
        self.events.append(event)
        async with self._changed:
            self._changed.notify_all()
        if self.gate is not None:
            await self.gate.wait()

    async def wait_for(self, predicate: Callable[[], T], timeout: float = 5.0) -> T:
        found: list[T] = []

        def check() -> bool:
            value = predicate()
            if value:
                found.append(value)
            return bool(value)

        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(check)
        return found[0]

    async def next_event(self, count: int = 1, timeout: float = 5.0) -> InboundEvent:
        """Wait until ``count`` events arrived; return the last of them."""
        return await self.wait_for(lambda: len(self.events) >= count and self.events[-1], timeout)


def sim_settings(sim: TelegramSim, **changes: Any) -> TelegramSettings:
    values: dict[str, Any] = {
        "base_url": f"{sim.url}/bot",
        "base_file_url": f"{sim.url}/file/bot",
        "edit_interval": 0.05,
        "poll": PollSettings(timeout=1, backoff_initial=0.05, backoff_max=0.2),
    }
    values.update(changes)
    return TelegramSettings(**values)


ALLOWED = frozenset({str(ALICE.id), str(BOB.id)})
MENU = command_menu()


@dataclass(frozen=True, slots=True)
class GatewaySetup:
    """What a test may vary about the gateway it runs."""

    busy_policy: BusyPolicy = "queue"
    stop_clears_queue: bool = True
    approval_timeout: float = 30.0
    edit_interval: float = 0.25
    progress: ProgressConfig = field(
        default_factory=lambda: ProgressConfig(mode="all", becomes_reply=False)
    )
    allowed_users: frozenset[str] = ALLOWED
    retry: RetryPolicy | None = None
    telegram: Mapping[str, Any] = field(default_factory=dict)
    """More ``TelegramSettings`` (e.g. its flood limits, scaled to the simulator's).
    ``streaming`` is ``"off"`` unless given here: the tests of streamed answers ask for it
    (``tests/telegram/test_e2e_streaming.py``)."""
    clock: PaceClock | None = None
    """The clock the flood limits are paced on; ``None``: a :class:`TestClock` the
    simulator shares (no test waits for a flood window)."""
    attachments: Attachments = DEFAULT_ATTACHMENTS
    """``[attachments]`` and ``[transcription]`` as the service takes them."""
    vision: bool = False
    """The profile's model accepts images."""
    stream: bool = False
    """The profile asks the model for SSE streams (the reply's text as it is written)."""
    access: Mapping[str, Any] = field(default_factory=dict)
    """More ``AccessPolicy`` fields (``require_mention``, ``allow_bots``, ``bot_limits``)."""
    debounce_ms: int = 0
    """The profile's debounce window (``debounce_ms``)."""
    debounce: Pace = REAL_TIME
    """The clock and sleep of the debounce window (a test's manual clock)."""
    mcp: Any = None
    """Started ``core.mcp.servers.McpServers``: their tools and approval policy join."""
    memory: bool | MemorySection = False
    """``[memory] enabled`` with its defaults, or with this section
    (:mod:`gateway.control.memory`)."""
    skills: Any = None
    """A ``gateway.control.skills.SkillsFeature``: the ``default`` profile's skills join."""
    usage: Any = None
    """A ``gateway.control.usage.UsageFeature``: model calls recorded, ``[quotas]`` checked."""


def _section(memory: bool | MemorySection) -> MemorySection:
    return memory if isinstance(memory, MemorySection) else MemorySection(enabled=True)


class ScaledClock(TestClock):
    """A :class:`TestClock` whose waits last ``scale`` of their time (the rest is skipped):
    waits keep their order and proportion, at a hundredth of the time by default."""

    def __init__(self, scale: float = 0.01) -> None:
        super().__init__()
        self.scale = scale

    async def sleep(self, seconds: float) -> None:
        waited = max(seconds, 0.0) * self.scale
        self.skipped += max(seconds, 0.0) - waited
        await asyncio.sleep(waited)


def shared_clock(sim: TelegramSim, wanted: PaceClock | None) -> PaceClock:
    """``wanted``, or the sim's test clock (made on first use, kept across restarts); the
    sim's flood windows are measured on the same clock."""
    owner = getattr(sim.clock, "__self__", None)
    clock = wanted or (owner if isinstance(owner, TestClock) else TestClock())
    sim.clock = clock.now
    return clock


class Gateway:
    """One running GatewayService with its Telegram adapter."""

    def __init__(
        self, sim: TelegramSim, models: ScriptedModelServer, store: SqliteStore, workspace: Path,
        setup: GatewaySetup,
    ) -> None:  # fmt: skip
        self.sim, self.store, self.workspace, self.setup = sim, store, workspace, setup
        self.model = OpenAIClient(base_url=models.url, model="scripted", trust_env=False)
        self.clock = shared_clock(sim, setup.clock)
        settings = {
            "edit_interval": setup.edit_interval, "commands": MENU, "streaming": "off",
            **setup.telegram,
        }  # fmt: skip
        self.adapter = TelegramAdapter(
            sim.token,
            store,
            sim_settings(sim, pace_clock=self.clock, **settings),
            key_rule=session_key,
        )
        self.service = self._compose()
        self.service.streams = Streams(clock=self.clock.now, sleep=self.clock.sleep)
        self.stopping = False
        self.stopped = False

    def _compose(self) -> GatewayService:
        hooks = HookRegistry()
        register_builtin_hooks(hooks)
        mcp = self.setup.mcp
        if mcp is not None:
            mcp.register_approval(hooks)
        profile = AgentProfile(
            soul="You are a test agent.",
            workspace=self.workspace,
            approval_timeout=self.setup.approval_timeout,
            busy_policy=self.setup.busy_policy,
            stop_clears_queue=self.setup.stop_clears_queue,
            vision=self.setup.vision,
            stream=self.setup.stream,
            debounce_ms=self.setup.debounce_ms,
        )
        section = self.setup.memory
        memory = None if section is False else MemoryFeature.build(self.store, _section(section))
        skills = self.setup.skills
        if skills is not None:
            profile = skills.profile("default", profile)
        engine = Engine(
            store=self.store,
            model=self.model,
            memory=memory,
            usage=self.setup.usage,
            tools=ToolRegistry(
                builtin_tools(self.workspace, terminal_timeout=20)
                + (memory.tools("default") if memory else [])
                + (skills.tools("default", NoSandbox()) if skills else []),
                sources=[] if mcp is None else [mcp.tools()],
            ),
            hooks=hooks,
            profiles={"default": profile},
            retry=self.setup.retry,
        )
        policy = AccessPolicy(allowed_users=self.setup.allowed_users, **self.setup.access)
        chat = ChatPolicy(
            access={"telegram": policy},
            progress=self.setup.progress,
        )
        return GatewayService(
            engine, chat, Pacing(debounce=self.setup.debounce), adapters=[self.adapter],
            attachments=self.setup.attachments,
        )  # fmt: skip

    async def start(self) -> Gateway:
        await self.service.start()
        return self

    async def stop(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """Stop gracefully (running turns get ``grace`` seconds): a turn cut short leaves
        its update to replay next run."""
        if self.stopped:
            return
        self.stopping, self.stopped = True, True
        await self.service.stop(grace)
        await self.model.aclose()

    async def idle(self, key: str) -> None:
        """Wait until ``key`` has no running or queued turn."""
        await asyncio.wait_for(self.service.dispatcher.wait_idle(key), 10)


GatewayFactory = Callable[..., Awaitable[Gateway]]


@asynccontextmanager
async def gateway_runs(
    telegram_sim: TelegramSim, model_server: Any, store: SqliteStore, tmp_path: Path,
    kind: type[Gateway] | None = None,
) -> AsyncIterator[GatewayFactory]:  # fmt: skip
    """Start gateway runs (of ``kind``, default :class:`Gateway`) on the shared sim, model
    server and database, each call with its own :class:`GatewaySetup` changes; all stopped
    at the end. The body of the ``gateway`` fixtures."""
    runs: list[Gateway] = []
    workspace = tmp_path / "workspace"
    workspace.mkdir()

    async def start(**changes: Any) -> Gateway:
        setup = replace(GatewaySetup(), **changes)
        run = (kind or Gateway)(telegram_sim, model_server, store, workspace, setup)
        runs.append(run)
        return await run.start()

    try:
        yield start
    finally:
        for run in runs:
            await run.stop()


def replies(sim: TelegramSim, chat: int, text: str) -> list[SimMessage]:
    """Bot messages in ``chat`` that were *sent* (not edited into) containing ``text``."""
    return [m for m in sim.bot_messages(chat) if text in _first_text(m)]


def _first_text(message: SimMessage) -> str:
    first = message.history[0] if message.history else message.raw
    return str(first.get("text", ""))


class AlbumGate:
    """The album window (``TelegramSettings.album_sleep``), opened by the test: an album is
    folded once ``opened`` is set and no part arrived since its last look."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        await self.opened.wait()
