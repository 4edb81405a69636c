"""The runtime: engine + dispatcher + approvals + chat layer, composed once.

:class:`GatewayService` is the runtime that :class:`gateway.app.Gateway` starts and stops
(the app owns the lifecycle: store, model client, signals); :mod:`gateway.wiring` builds
it from the configuration. Composed by hand, the service first, then its adapters::

    service = GatewayService(
        Engine(store, model_client, registry, hooks, profiles={"default": AgentProfile()}),
        ChatPolicy(
            access={"telegram": AccessPolicy(allowed_users=frozenset({"12345"}))},
            approvers={"telegram": frozenset({"12345"})},   # bare ids, per platform
            progress=ProgressConfig(mode="all"),
        ),
    )
    service.attach(TelegramAdapter(token, store))
    await service.start()      # recover what a previous run left, adapter.start(router)
    ...
    await service.stop()       # turns stopped, approvals cancelled, adapters stopped

* The adapter builds each :class:`~adapters.base.InboundEvent` with a session key from
  its key rule (``adapters.session_keys.key_rule``) and awaits ``sink(event)`` (the
  router). The sink returns quickly: turns run in the Dispatcher's workers.
* The command menu to register (``setMyCommands``) is
  :func:`gateway.control.syntax.command_menu`, passed to the adapter when it is built.
* Requesters and approvers are compared platform-qualified (``"telegram:12345"``, see
  :func:`gateway.control.access.qualified`): ``approvers`` holds bare ids per platform and the
  service qualifies them, so an id configured for one platform approves only there.
* Each event carries a :class:`~adapters.base.Receipt`, settled True once the turn it
  started has delivered its reply (or at once when it started none: a command), False
  when a shutdown cut it short — the turn, or the delivery of its reply. An adapter with a
  durable inbox awaits it and marks the update done only after True, and replays it
  otherwise.
* Replies, progress edits, approval cards and notices come back as call values
  (:mod:`adapters.calls`) through each bot's pipeline (:mod:`gateway.outbound.pipeline`: schedule,
  redact, count) to the adapter's one ``perform(call)``, with text in
  ``capabilities.markup`` (or ``markup=False`` for plain text); limits and paces are read
  from ``capabilities``. Errors must be raised as the ``adapters.base`` error tree.
  ``traffic`` (the gateway's metrics) is the counting step of every pipeline.
* ``hooks`` should already hold the built-in policies
  (``core.hooks.builtin.register_builtin_hooks``): they decide which calls ask first.

Per turn (:mod:`gateway.turns.runner`, the Dispatcher's ports): typing, one progress view
with its stop button, the streamed text, then the reply sent exactly once
(:mod:`gateway.turns.replies`, docs/architecture.md §13). The feature modules (links, pairing,
reactions, session settings) reach the router through :mod:`gateway.control.features`, which
also says who approves where.

With several processes on one PostgreSQL store (docs/cluster.md) ``service.cluster`` is
this process's node (:class:`gateway.cluster.port.ClusterPart`): every adapter gets its
claim-or-forward sink in front of the router, it starts once the adapters did and stops
last; a turn whose session another process took over ends quietly and sends nothing
(:mod:`gateway.turns.runner`). ``None`` with SQLite.

The service does not own ``store`` or ``model``: the caller closes them after ``stop``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Protocol

from adapters.base import Adapter, ChatRef, InboundEvent
from core.agent.compaction import Compacted
from core.agent.context import ContextUse
from core.agent.loop import CommonAgent
from core.agent.profile import AgentProfile, BusyPolicy
from core.approvals import Approvals
from core.cancellation import drain_abandoned
from core.debounce import REAL_TIME, Pace
from core.dispatcher import SHUTDOWN_GRACE_SECONDS, Dispatcher, ResultObserver
from core.hooks.registry import HookRegistry
from core.model.base import ModelClient
from core.model.retry import RetryPolicy
from core.store.base import ApprovalRecord, Store
from core.tools.base import ToolRegistry
from gateway.cluster.port import ClusterPart
from gateway.control.access import AccessControl, AccessPolicy, user_of
from gateway.control.bot_guard import BotGuard
from gateway.control.features import ApproverRule, with_approvers
from gateway.control.links import Links
from gateway.control.usage import UsageFeature
from gateway.inbound.dispatch import Router
from gateway.inbound.pairing import Pairing, PairingSettings
from gateway.inbound.stages import Inbound, InboundFeatures, Named
from gateway.outbound.delivery import TYPING_INTERVAL, Delivery
from gateway.outbound.directory import ChatDirectory
from gateway.outbound.pipeline import Relay, Traffic
from gateway.turns.approvals import ChatApprover
from gateway.turns.files import FileDelivery, Spool
from gateway.turns.intake import DEFAULT_ATTACHMENTS, Attachments, Intake
from gateway.turns.presets import NO_PRESETS, ModelPresets
from gateway.turns.progress import ProgressConfig
from gateway.turns.reactions import Reactions
from gateway.turns.replies import FAILED_REPLY as FAILED_REPLY
from gateway.turns.replies import Replies
from gateway.turns.replies import reply_text as reply_text
from gateway.turns.runner import ChatTurns, ProfileAgents, ProgressViews, TurnPacing
from gateway.turns.running_steps import RunningSteps
from gateway.turns.settings import SessionSettingsBook, SettingsCommands
from gateway.turns.stops import StopButtons, StoppedTurns
from gateway.turns.streaming import Streams

if TYPE_CHECKING:
    from gateway.control.memory import MemoryFeature

logger = logging.getLogger(__name__)

ABANDONED_GRACE = 2.0
"""Seconds given at shutdown to work a stop abandoned (it ignored cancellation)."""

Sleep = Callable[[float], Awaitable[None]]

DEFAULT_PROGRESS = ProgressConfig()


@dataclass(frozen=True, slots=True)
class Engine:
    """What runs turns: the store, the model client, the tools (one registry, or one per
    profile), the hooks (already holding the built-in policies), the profiles."""

    store: Store
    model: ModelClient
    tools: ToolRegistry | Mapping[str, ToolRegistry]
    hooks: HookRegistry
    profiles: Mapping[str, AgentProfile]
    default_profile: str = "default"
    retry: RetryPolicy | None = None
    memory: MemoryFeature | None = None
    """``[memory]`` when on (:mod:`gateway.control.memory`): the prompt section and ``/memory``."""
    usage: UsageFeature | None = None
    """Usage and quotas (:mod:`gateway.control.usage`): each agent's meter and ``/usage``."""


@dataclass(frozen=True, slots=True)
class ChatPolicy:
    """Who may talk and approve on each platform, and how progress shows.

    ``approvers`` holds bare ids per platform (the service qualifies them); ``operators``
    are platform-qualified ids who may approve on every platform (the dashboard's
    ``[approvals] web`` approvers, ``"web:admin"``)."""

    access: Mapping[str, AccessPolicy] = field(default_factory=dict)
    approvers: Mapping[str, frozenset[str]] = field(default_factory=dict)
    operators: frozenset[str] = frozenset()
    platform_profiles: Mapping[str, str] = field(default_factory=dict)
    progress: ProgressConfig = DEFAULT_PROGRESS
    pairing: PairingSettings = field(default_factory=PairingSettings)
    """Pairing's limits; who pairs where is each platform's ``AccessPolicy``."""


@dataclass(frozen=True, slots=True)
class Pacing:
    """The clock and the waits of the chat layer (tests put fakes here)."""

    clock: Callable[[], float] = time.monotonic
    sleep: Sleep = asyncio.sleep
    typing_sleep: Sleep = asyncio.sleep
    typing_interval: float = TYPING_INTERVAL
    debounce: Pace = REAL_TIME
    """What the debounce window (``debounce_ms``) is measured on and waits with."""
    wall_clock: Callable[[], float] = time.time
    """Wall time, for what another process reads too (pairing codes' expiry)."""


class ServicePart(Protocol):
    """A feature that runs beside the chats (the scheduler of ``[schedule]``): started
    last, closed first."""

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...


class GatewayService:
    def __init__(
        self,
        engine: Engine,
        chat: ChatPolicy = ChatPolicy(),
        pacing: Pacing = Pacing(),
        *,
        adapters: Sequence[Adapter] = (),
        traffic: Traffic | None = None,
        attachments: Attachments = DEFAULT_ATTACHMENTS,
        presets: ModelPresets = NO_PRESETS,
    ) -> None:
        if engine.default_profile not in engine.profiles:
            names = sorted(engine.profiles)
            raise ValueError(f"default profile {engine.default_profile!r} is not among {names}")
        store = self.store = engine.store
        self._approvers = dict(chat.approvers)
        """Bare user ids per platform, as configured (they may always talk to the bot)."""
        self.operators = chat.operators
        self._clock = pacing.clock
        sleep = pacing.sleep
        self.parts: list[ServicePart] = []
        """Features started after the adapters and closed before them."""
        self.dashboard_extras: dict[str, Callable[[], Awaitable[object]]] = {}
        """Sections a feature adds to the dashboard's state, by name (``[schedule]``: jobs)."""
        self.stopped_turns = StoppedTurns()
        self.directory = ChatDirectory(list(adapters), traffic=traffic)
        self.approver = ChatApprover(self.directory, sleep=sleep, store=store)
        self.links = Links(store, notify=self._notify)
        approvers_of = self.approvers_of = ApproverRule(self._approvers, self.operators, self.links)
        views = ProgressViews()
        running = RunningSteps(views.of)  # the first step shown in a stream
        running.observe(engine.hooks)
        self.approvals = Approvals(
            store, running.approver(self.approver), timeout=self._approval_timeout,
            approvers=approvers_of,
        )  # fmt: skip
        self.settings = SessionSettingsBook(store, presets)
        """Per-chat settings (``/model``, ``/busy``, ``/progress``, ``/verbose``); the
        presets' clients are closed at :meth:`stop`. The agents get its model chooser only
        when presets exist (:meth:`_choose_models`)."""
        choose = self.settings.choose if presets else None  # none: /model picks nothing
        agents = {
            name: CommonAgent(
                store,
                engine.model,
                _tools_of(engine.tools, name),
                engine.hooks,
                self.approvals,
                profile,
                retry=engine.retry,
                choose_model=choose,
                context_section=engine.memory.section(name) if engine.memory else None,
                meter=engine.usage.meter(name, approvers_of) if engine.usage else None,
            )
            for name, profile in engine.profiles.items()
        }
        self.profile_agents = ProfileAgents(agents, chat.platform_profiles, engine.default_profile)
        """Which agent runs a session key's turns (the turns ask it)."""
        self.agents = self.profile_agents.by_name
        self.delivery = Delivery(sleep=sleep, store=store)
        self.replies = Replies(self.directory, self.delivery, chat.progress)
        self.intake = Intake(store, self.delivery, attachments)
        spool = Spool(attachments.outbox)
        self.files = FileDelivery(store, self.directory, self.delivery, sleep=sleep, spool=spool)
        self.reactions = Reactions(self.directory, chat.progress.reactions)
        stops = StopButtons(self.approvals, self.stopped_turns)
        self.turns = ChatTurns(
            _turn_pacing(chat, pacing), agent_for=self.profile_agents.of, settings=self.settings,
            directory=self.directory, views=views, stops=stops,
            stopped=self.stopped_turns, awaiting=self.approvals.pending,
            streams=Streams(clock=pacing.clock, sleep=pacing.sleep, store=store),
            intake=self.intake, replies=self.replies, files=self.files,
            reactions=self.reactions if self.reactions.enabled else None,
        )  # fmt: skip
        debounces = any(profile.debounce_ms for profile in engine.profiles.values())
        self.dispatcher = self._dispatcher(pacing.debounce, debounces)
        self.pairing = self._pairing(chat, pacing)
        self.router = self._router(chat.access, stops)
        self.chat_settings = SettingsCommands(self.settings, self._model_name, self._is_owner)
        self.router.command_handlers.update(
            link=self.links.command_link, unlink=self.links.command_unlink,
            pair=self.pairing.command, **self.chat_settings.handlers(),
        )  # fmt: skip
        self._bots_allowed = any(bool(p.allow_bots) for p in chat.access.values())
        self.memory = engine.memory
        """``[memory]`` when on: ``/memory`` here, the counts on the dashboard."""
        if engine.memory is not None:
            self.router.command_handlers.update(engine.memory.commands(approvers_of))
        if engine.usage is not None:
            self.router.command_handlers.update(engine.usage.commands(approvers_of))
            self.dashboard_extras["usage"] = engine.usage.panel().current
        self._cluster: ClusterPart[GatewayService] | None = None
        self.inbound: Inbound | None = None
        """The inbound fold every adapter's events pass, built once at :meth:`start`
        (:meth:`_inbound`): its ``names`` are the stage list."""

    @property
    def streams(self) -> Streams | None:
        """The turns' streamed replies (a test may put its own, on its clock, before
        :meth:`start`); None once started when no attached bot streams."""
        return self.turns.streams

    @streams.setter
    def streams(self, streams: Streams | None) -> None:
        self.turns.streams = streams

    @property
    def result_hook(self) -> ResultObserver:
        """Where the Dispatcher reports each finished turn: the turns' delivery
        (:meth:`gateway.turns.runner.ChatTurns.on_result`), called straight. A feature may
        wrap it before the first turn (``[schedule]`` watches its turns' results)."""
        return self.dispatcher.on_result or self.turns.on_result

    @result_hook.setter
    def result_hook(self, hook: ResultObserver) -> None:
        self.dispatcher.on_result = hook

    @property
    def cluster(self) -> ClusterPart[GatewayService] | None:
        """This process's cluster node: set (before :meth:`start`) when several processes
        share the store; the turns then ask it whether their session is still theirs."""
        return self._cluster

    @cluster.setter
    def cluster(self, node: ClusterPart[GatewayService] | None) -> None:
        self._cluster = self.turns.lost = node

    def attach(self, adapter: Adapter, relay: Relay | None = None) -> None:
        """Add a platform's adapter (before :meth:`start`): its events reach the router,
        replies and cards go out through it (``relay``: a leased bot's cluster stage)."""
        self.directory.add(adapter, relay)

    def _dispatcher(self, debounce: Pace, debounces: bool) -> Dispatcher:
        """The Dispatcher, asking each key's debounce window only when some profile
        debounces (``debounce_ms`` > 0): off, debounce is not on a message's path."""
        turns = self.turns
        return Dispatcher(
            turns.run_turn,
            policy_for=self._policy_for,
            queue_limit=self._queue_limit,
            on_result=turns.on_result,
            stop_clears_queue=self._stop_clears_queue,
            debounce=self._debounce if debounces else None,
            debounce_pace=debounce,
        )

    def _router(self, access: Mapping[str, AccessPolicy], stops: StopButtons) -> Router:
        return Router(
            dispatcher=self.dispatcher,
            approvals=self.approvals,
            store=self.store,
            access=AccessControl(with_approvers(access, self._approvers), self.pairing.is_paired),
            directory=self.directory,
            delivery=self.delivery,
            stopped=self.stopped_turns,
            stop_buttons=stops,
            clock=self._clock,
            context=self,
            policy_for=self._policy_for,
        )

    def _pairing(self, chat: ChatPolicy, pacing: Pacing) -> Pairing:
        """Strangers' codes and ``/pair`` (docs/pairing.md)."""
        return Pairing(
            self.store, with_approvers(chat.access, self._approvers), operators=self.operators,
            settings=chat.pairing, clock=pacing.wall_clock, sleep=pacing.sleep,
            notify=self._notify,
        )  # fmt: skip

    def features(self) -> InboundFeatures:
        """Which optional inbound stages are on: the cluster (a PostgreSQL store), pairing
        (some platform pairs), the bot guard (some platform lets bots in), links (two
        platforms or more — a link joins identities on different platforms —, a link
        already stored, or a cluster, whose links may be made by another process),
        reactions."""
        return InboundFeatures(
            cluster=self.cluster is not None, pairing=self.pairing.enabled,
            bot_guard=self._bots_allowed, links=self._links_matter(),
            reactions=self.reactions.enabled,
        )  # fmt: skip

    def _links_matter(self) -> bool:
        many = len(self.directory.adapters) > 1
        return many or self.links.any or self.cluster is not None

    def _inbound(self) -> Inbound:
        """The inbound fold (:mod:`gateway.inbound.stages`), built once: only the stages
        of the features that are on."""
        on, router, access = self.features(), self.router, self.router.access
        stages = [Named("received", router.received)]
        if self.cluster is not None:
            stages.append(Named("cluster_claim", self.cluster.claim))
        stages.append(Named("press", router.press))
        if on.pairing:
            stages.append(Named("access_pairing", partial(self.pairing.admit, access)))
        else:
            stages.append(Named("access", access.admit))
        if on.bot_guard:
            guard = BotGuard(lambda p: access.policy(p).bot_limits, self._clock, self._tell)
            stages.append(Named("bot_guard", guard.pace))
        if on.links:
            stages.append(Named("link_rekey", self.links.rekeyed))
        stages.append(Named("record", router.record))
        if on.reactions:
            stages.append(Named("reactions", self.reactions.noted))
        return Inbound(stages, router.dispatch)

    async def _tell(self, event: InboundEvent, text: str) -> None:
        await self._notify(event.chat, text)

    async def _notify(self, chat: ChatRef, text: str) -> bool:
        outbound = self.directory.outbound(chat.platform)
        return outbound is not None and await self.delivery.notice(outbound, chat, text) is not None

    # lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        """Close what a previous run left open, start every adapter, then retire the cards
        of the approvals that run left open (editing needs a started adapter; the store is
        recovered first, so no new turn is mistaken for a stale one)."""
        stale = await self._recover()
        await self.links.load()
        self._choose_models()
        await self.files.load_unsent()  # sent after their session's next reply
        cluster = self.cluster
        inbound = self.inbound = self._inbound()
        if not any(_streams(adapter) for adapter in self.directory.adapters):
            self.streams = None  # no bot streams: no stream is opened, none is looked for
        for adapter in self.directory.adapters:
            await adapter.start(inbound.enter)
            if adapter.health.state != "down":  # down: reported by the adapter or the gateway
                logger.info("%s adapter started", adapter.platform)
        if cluster is not None:
            await cluster.start(self)  # takes the bots no other process owns
        for record in stale:
            await self.approver.retire(record)
        await self.pairing.start()
        for part in self.parts:
            await part.start()

    def _choose_models(self) -> None:
        """Each agent asks the chat's ``/model`` (:meth:`SessionSettingsBook.choose`) for
        its model only when presets exist (``[models.<name>]``; decided at construction and
        again at :meth:`start`, for presets set in between): with none ``/model`` can pick
        nothing, and a model call asks nothing of the settings."""
        choose = self.settings.choose if self.settings.presets else None
        for agent in self.agents.values():
            agent.choose_model = choose

    async def _recover(self) -> list[ApprovalRecord]:
        """Turns left running by a crash are failed; their approvals can never be answered.
        With several processes on PostgreSQL, only turns (and their approvals) no live
        process runs: those whose session lease is not live (``fail_running_turns``).

        Returns the approvals cancelled here, whose cards are still live."""
        failed = await self.store.fail_running_turns("gateway restarted")
        cancelled = await self.approvals.end_orphans()
        if failed or cancelled:
            logger.warning(
                "previous run left %d turn(s), %d approval(s) open", failed, len(cancelled)
            )
        return cancelled

    async def stop(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """Stop turns (running ones get ``grace`` seconds to end, then are cancelled;
        pending approvals end as cancelled), settle cards, stop adapters."""
        for part in reversed(self.parts):
            await part.aclose()
        await self.pairing.aclose()
        await self.dispatcher.aclose(grace)
        await self.approvals.aclose()
        await self.turns.aclose()
        if self.streams is not None:
            await self.streams.aclose()
        for bot in self.directory.bots:
            try:
                await bot.aclose()
                await bot.adapter.stop()
            except Exception:
                logger.exception("%s adapter did not stop cleanly", bot.platform)
        await self.intake.aclose()
        await self.settings.presets.aclose()
        self.files.spool.close()
        if self.cluster is not None:
            await self.cluster.stop()
        still_running = await drain_abandoned(ABANDONED_GRACE)
        if still_running:
            logger.warning("%d stopped task(s) ignored cancellation at shutdown", still_running)

    # per session key ------------------------------------------------------------------
    def profile_for(self, session_key: str) -> AgentProfile:
        return self.agent_for(session_key).profile

    async def context_use(self, session_key: str) -> ContextUse | None:
        """How full the session's context is (``/status``, docs/turn-loop.md §18)."""
        return await self.agent_for(session_key).context_use(session_key)

    async def compact(self, session_key: str) -> Compacted | None:
        """Summarise the session's older turns now (``/compact``)."""
        return await self.agent_for(session_key).compact(session_key)

    def agent_for(self, session_key: str) -> CommonAgent:
        """The agent of the profile the key's platform names; a linked session
        (``link:dm:<person>``, :mod:`gateway.control.links`) runs the default profile."""
        return self.profile_agents.of(session_key)

    def _policy_for(self, session_key: str) -> BusyPolicy:
        """The chat's ``/busy``, else the profile's (known once the key's turn started)."""
        return self.settings.busy(session_key, self.profile_for(session_key).busy_policy)

    async def settings_status(self, session_key: str) -> str | None:
        """``/status``'s line of the chat's settings."""
        return await self.chat_settings.status(session_key)

    def _model_name(self, session_key: str) -> str:
        return self.agent_for(session_key).model.model

    def _is_owner(self, event: InboundEvent) -> bool:
        """An owner of the event's platform (``owners``, approvers, operators: the same
        as pairing's), who may pick a preset with ``owners_only``."""
        return self.pairing.owns(user_of(event), event.platform)

    def _queue_limit(self, session_key: str) -> int:
        return self.profile_for(session_key).queue_limit

    def _stop_clears_queue(self, session_key: str) -> bool:
        return self.profile_for(session_key).stop_clears_queue

    def _debounce(self, session_key: str) -> float:
        return self.profile_for(session_key).debounce_ms / 1000

    def _approval_timeout(self, session_key: str) -> float:
        return self.profile_for(session_key).approval_timeout


def _streams(adapter: Adapter) -> bool:
    """The bot streams replies by sending or editing (not as the web chat's live text)."""
    capabilities = adapter.capabilities
    return capabilities.streaming != "off" and not capabilities.live_text


def _turn_pacing(chat: ChatPolicy, pacing: Pacing) -> TurnPacing:
    return TurnPacing(
        chat.progress, pacing.clock, pacing.sleep, pacing.typing_sleep, pacing.typing_interval
    )


def _tools_of(tools: ToolRegistry | Mapping[str, ToolRegistry], profile: str) -> ToolRegistry:
    """One registry for every profile, or each profile's own (none: no tools)."""
    return tools if isinstance(tools, ToolRegistry) else tools.get(profile, ToolRegistry())
