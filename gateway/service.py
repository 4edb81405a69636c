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
  :func:`gateway.chat_syntax.command_menu`, passed to the adapter when it is built.
* Requesters and approvers are compared platform-qualified (``"telegram:12345"``, see
  :func:`gateway.access.qualified`): ``approvers`` holds bare ids per platform and the
  service qualifies them, so an id configured for one platform approves only there.
* Each event carries a :class:`~adapters.base.Receipt`, settled True once the turn it
  started has delivered its reply (or at once when it started none: a command), False
  when a shutdown cut it short — the turn, or the delivery of its reply. An adapter with a
  durable inbox awaits it and marks the update done only after True, and replays it
  otherwise.
* Replies, progress edits, approval cards and notices come back as call values
  (:mod:`adapters.calls`) through each bot's pipeline (:mod:`gateway.pipeline`: schedule,
  redact, count) to the adapter's one ``perform(call)``, with text in
  ``capabilities.markup`` (or ``markup=False`` for plain text); limits and paces are read
  from ``capabilities``. Errors must be raised as the ``adapters.base`` error tree.
  ``traffic`` (the gateway's metrics) is the counting step of every pipeline.
* ``hooks`` should already hold the built-in policies
  (``core.hooks.builtin.register_builtin_hooks``): they decide which calls ask first.

Per turn: the typing indicator runs while the engine works, the step callback feeds one
:class:`ProgressView`, the reply's text streams where the bot streams
(:mod:`gateway.streaming`, docs/architecture.md §13), and when the Dispatcher reports the
result the reply is rendered, chunked and sent exactly once (:mod:`gateway.replies`; none
for an interrupted turn: ``/stop`` already answered), then the progress message is
finalized or removed. The feature modules (links, pairing, reactions, session settings)
reach the router through :mod:`gateway.chat_features`, which also says who approves where.

With several processes on one PostgreSQL store (docs/cluster.md) ``service.cluster`` is
this process's node (:class:`gateway.cluster.port.ClusterPart`): every adapter gets its
claim-or-forward sink in front of the router, it starts once the adapters did and stops
last; a turn whose session another process took over (a write refused as ``Fenced``, or
the lease found gone when it ends) ends quietly and sends nothing. ``None`` with SQLite.

The service does not own ``store`` or ``model``: the caller closes them after ``stop``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from adapters.base import Adapter, ChatRef, InboundEvent
from adapters.session_keys import parse_session_key
from core.agent.compaction import Compacted
from core.agent.context import ContextUse
from core.agent.control import TurnControl
from core.agent.loop import CommonAgent
from core.agent.profile import AgentProfile, BusyPolicy
from core.agent.turn import TurnResult, UserMessage
from core.approvals import Approvals
from core.cancellation import Cancelled, drain_abandoned
from core.debounce import REAL_TIME, Pace
from core.dispatcher import SHUTDOWN_GRACE_SECONDS, Dispatcher
from core.hooks.registry import HookRegistry
from core.model.base import ModelClient
from core.model.retry import RetryPolicy
from core.store.base import ApprovalRecord, Store
from core.store.fencing import Fenced
from core.tools.base import ToolRegistry
from gateway.access import AccessControl, AccessPolicy, user_of
from gateway.approval_card import ChatApprover
from gateway.chat_commands import StoppedTurns
from gateway.chat_features import ApproverRule, install_features, with_approvers
from gateway.chats import ChatDirectory, Place
from gateway.cluster.port import ClusterPart
from gateway.delivery import TYPING_DELAY, TYPING_INTERVAL, Delivery, Typing
from gateway.file_delivery import FileDelivery, Spool
from gateway.intake import DEFAULT_ATTACHMENTS, NOTHING_TO_RUN, Attachments, Intake
from gateway.links import Links
from gateway.live_text import live_reply
from gateway.model_presets import NO_PRESETS, ModelPresets
from gateway.pairing import Pairing, PairingSettings
from gateway.pipeline import Traffic
from gateway.progress import ProgressConfig, ProgressView
from gateway.reactions import Reactions
from gateway.replies import FAILED_REPLY as FAILED_REPLY
from gateway.replies import Replies, reply_text
from gateway.router import Router
from gateway.session_settings import SessionSettingsBook, SettingsCommands
from gateway.streaming import StreamedReply, Streams

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
        self._default_profile = engine.default_profile
        self._platform_profiles = dict(chat.platform_profiles)
        self._approvers = dict(chat.approvers)
        """Bare user ids per platform, as configured (they may always talk to the bot)."""
        self.operators = chat.operators
        self._progress, self._typing_interval = chat.progress, pacing.typing_interval
        self._typing_sleep = pacing.typing_sleep
        self._clock, self._sleep = pacing.clock, pacing.sleep
        sleep = pacing.sleep
        self._views: dict[str, ProgressView] = {}
        self._fenced: set[str] = set()
        """Sessions whose turn ended on a refused write (another process runs them now)."""
        self.streams = Streams(clock=pacing.clock, sleep=pacing.sleep)
        self.stopped_turns = StoppedTurns()
        self.directory = ChatDirectory(list(adapters), traffic=traffic)
        self.approver = ChatApprover(self.directory, sleep=sleep, store=store)
        self.links = Links(store, notify=self._notify)
        approvers_of = ApproverRule(self._approvers, self.operators, self.links)
        self.approvals = Approvals(
            store, self.approver, timeout=self._approval_timeout, approvers=approvers_of
        )
        self.settings = SessionSettingsBook(store, presets)
        """Per-chat settings (``/model``, ``/busy``, ``/progress``, ``/verbose``); the
        presets' clients are closed at :meth:`stop`."""
        self.agents = {
            name: CommonAgent(
                store,
                engine.model,
                _tools_of(engine.tools, name),
                engine.hooks,
                self.approvals,
                profile,
                retry=engine.retry,
                choose_model=self.settings.choose,
            )
            for name, profile in engine.profiles.items()
        }
        self.delivery = Delivery(sleep=sleep, store=store)
        self.replies = Replies(self.directory, self.delivery, chat.progress)
        self.intake = Intake(store, self.delivery, attachments)
        spool = Spool(attachments.outbox)
        self.files = FileDelivery(store, self.directory, self.delivery, sleep=sleep, spool=spool)
        self.dispatcher = self._dispatcher(pacing.debounce)
        self.pairing = self._pairing(chat, pacing)
        self.router = self._router(chat.access)
        self.reactions = Reactions(self.directory, chat.progress.reactions)
        self.chat_settings = SettingsCommands(self.settings, self._model_name, self._is_owner)
        install_features(
            self.router, links=self.links, pairing=self.pairing, reactions=self.reactions,
            settings=self.chat_settings,
        )  # fmt: skip
        self.cluster: ClusterPart | None = None
        """Set (before :meth:`start`) when several processes share the store."""

    def attach(self, adapter: Adapter) -> None:
        """Add a platform's adapter (before :meth:`start`): its events reach the router,
        replies and cards go out through it."""
        self.directory.add(adapter)

    def _dispatcher(self, debounce: Pace) -> Dispatcher:
        return Dispatcher(
            self._run_turn,
            policy_for=self._policy_for,
            queue_limit=self._queue_limit,
            on_result=self._on_result,
            stop_clears_queue=self._stop_clears_queue,
            debounce=self._debounce,
            debounce_pace=debounce,
        )

    def _router(self, access: Mapping[str, AccessPolicy]) -> Router:
        return Router(
            dispatcher=self.dispatcher,
            approvals=self.approvals,
            store=self.store,
            access=AccessControl(with_approvers(access, self._approvers), self.pairing.is_paired),
            directory=self.directory,
            delivery=self.delivery,
            stopped=self.stopped_turns,
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
        cluster = self.cluster
        sink = self.router if cluster is None else cluster.sink(self.router)
        for adapter in self.directory.adapters:
            await adapter.start(sink)
            if adapter.health.state != "down":  # down: reported by the adapter or the gateway
                logger.info("%s adapter started", adapter.platform)
        if cluster is not None:
            await cluster.start(self)  # takes the bots no other process owns
        for record in stale:
            await self.approver.retire(record)
        await self.pairing.start()

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
        await self.pairing.aclose()
        await self.dispatcher.aclose(grace)
        await self.approvals.aclose()
        for view in list(self._views.values()):
            await view.aclose()
        self._views.clear()
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
        (``link:dm:<person>``, :mod:`gateway.links`) runs the default profile."""
        platform = parse_session_key(session_key).platform
        name = self._platform_profiles.get(platform, self._default_profile)
        return self.agents.get(name) or self.agents[self._default_profile]

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

    # one turn -------------------------------------------------------------------------
    async def _run_turn(
        self, session_key: str, message: UserMessage, control: TurnControl
    ) -> TurnResult:
        """The dispatcher's port. A write refused because another process took the
        session over (``Fenced``) ends the turn quietly: nothing more is sent from here."""
        try:
            return await self._turn(session_key, message, control)
        except Fenced as exc:
            self._fenced.add(session_key)
            raise Cancelled("the session runs in another process now") from exc

    async def _lost_session(self, session_key: str) -> bool:
        """The turn that just ended ran for a session another process has taken over."""
        fenced = session_key in self._fenced
        self._fenced.discard(session_key)
        cluster = self.cluster
        return cluster is not None and (await cluster.fenced_out() or fenced)

    async def _turn(
        self, session_key: str, message: UserMessage, control: TurnControl
    ) -> TurnResult:
        agent = self.agent_for(session_key)
        await self.settings.load(session_key)  # from now on its /busy is known (at once)
        place = self.directory.turn_place(session_key, message.origin)
        await self.reactions.started(message)
        taken = await self._take_in(session_key, message, place, agent, control)
        if taken is None:
            return NOTHING_TO_RUN
        message = taken
        if place is None:
            return await agent.run_turn(session_key, message, control)
        stops = self.router.stop_buttons
        stop_id = stops.register(session_key, control, message.sender_id)
        stream = self.streams.open(session_key, place)
        progress = await self.settings.progress(session_key, self._progress)
        view = ProgressView(
            place.outbound, place.chat, progress, clock=self._clock, sleep=self._sleep,
            buttons=stops.buttons(stop_id, place.outbound.capabilities),
            shown_by=stream.show_step if stream is not None and stream.shows_progress else None,
        )  # fmt: skip
        self._views[session_key] = view
        quiet = partial(self._typing_paused, session_key, view)
        typing = Typing(
            place.outbound,
            place.chat,
            interval=self._typing_interval,
            sleep=self._typing_sleep,
            paused=quiet,
            delay=TYPING_DELAY,
        )
        try:
            async with typing, live_reply(place) as live:
                return await agent.run_turn(
                    session_key, message, control, step_callback=view.step, on_notice=view.notice,
                    on_text=stream or live, on_file=self.files.queue_for(session_key, place),
                )  # fmt: skip
        except BaseException:
            self._views.pop(session_key, None)
            await view.aclose()
            await self.streams.discard(session_key)
            raise
        finally:
            stops.forget(stop_id)

    async def _take_in(
        self, key: str, message: UserMessage, place: Place | None, agent: CommonAgent,
        control: TurnControl,
    ) -> UserMessage | None:  # fmt: skip
        """The message's files saved in the session's workspace (docs/attachments.md); None
        when nothing is left to run. ``/stop`` ends a download too."""
        if not message.attachments:
            return message
        workspaces = agent.profile.workspaces()
        workspace = await asyncio.to_thread(workspaces.ensure, key)
        return await control.token.guard(self.intake.take_in(key, message, place, workspace))

    def _typing_paused(self, session_key: str, view: ProgressView) -> bool:
        """No typing while a card waits for a person, nor in a shared chat once the
        progress message shows the turn is alive (chat actions count as group messages)."""
        if self.approvals.pending(session_key):
            return True
        shared = parse_session_key(session_key).chat_type != "dm"
        return shared and view.message is not None

    async def _on_result(self, session_key: str, message: UserMessage, result: TurnResult) -> None:
        """Deliver the reply (none after an acknowledged ``/stop``), then close the view.

        A delivery cut off (shutdown cancelled it mid rate-limit wait) or failed raises, so
        the message's ``handled`` outcome is False and a durable inbox replays the update
        rather than losing the reply (:mod:`core.dispatcher`, "Handled"). Nothing is sent
        for a session another process took over (it answers)."""
        view, stream = self._views.pop(session_key, None), self.streams.take(session_key)
        if await self._lost_session(session_key):
            await _quiet_end(view, stream)
            self.directory.turn_ended(session_key)
            return
        stopped = self.stopped_turns.was_stopped(result.turn_id)
        await self.reactions.ended(message, result)
        try:
            if stopped:
                logger.info("turn %s: /stop was acknowledged; its reply suppressed", result.turn_id)
            else:
                await self.replies.deliver(session_key, result, view, stream)
            await self.files.after_turn(session_key, result, stopped=stopped)
        finally:
            if stream is not None:  # stopped, or no reply: cleared (nothing once handed over)
                await stream.clear()
            if view is not None:
                remove = self._progress.becomes_reply and reply_text(result) is not None
                await view.finish("interrupted" if stopped else result.status, remove=remove)
            self.directory.turn_ended(session_key)


async def _quiet_end(view: ProgressView | None, stream: StreamedReply | None) -> None:
    """A turn's view and stream closed without a call to the platform."""
    if view is not None:
        await view.aclose()
    if stream is not None:
        await stream.aclose()


def _tools_of(tools: ToolRegistry | Mapping[str, ToolRegistry], profile: str) -> ToolRegistry:
    """One registry for every profile, or each profile's own (none: no tools)."""
    return tools if isinstance(tools, ToolRegistry) else tools.get(profile, ToolRegistry())
