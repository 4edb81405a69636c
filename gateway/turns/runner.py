"""One turn in a chat: what the user sees while the engine works, and the reply at the end.

:class:`ChatTurns` is the Dispatcher's pair of ports (``run_turn``, ``on_result``) that
:class:`gateway.service.GatewayService` composes (docs/architecture.md §3, §11). Per turn:
the message's files are taken in first (docs/attachments.md), the typing indicator runs
while the engine works, the step callback feeds one :class:`ProgressView` with its stop
button, the reply's text streams where the bot streams (:mod:`gateway.turns.streaming`,
docs/architecture.md §13), and when the Dispatcher reports the result the reply is
rendered, chunked and sent exactly once (:mod:`gateway.turns.replies`; none for an interrupted
turn: ``/stop`` already answered), then the progress message is finalized or removed.

With several processes on one store (docs/cluster.md, docs/architecture.md §16) a turn
whose session another process took over — a write refused as ``Fenced``, or the lease
found gone when it ends — ends quietly: its view and stream are closed without a call to
the platform, and nothing is sent (the other process answers).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from adapters.session_keys import parse_session_key
from core.agent.control import TurnControl
from core.agent.loop import CommonAgent
from core.agent.turn import TurnResult, UserMessage
from core.cancellation import Cancelled
from core.store.fencing import Fenced
from gateway.outbound.delivery import TYPING_DELAY, Typing
from gateway.outbound.directory import ChatDirectory, Place
from gateway.turns.files import FileDelivery
from gateway.turns.intake import NOTHING_TO_RUN, Intake
from gateway.turns.live_text import live_reply
from gateway.turns.progress import ProgressConfig, ProgressView
from gateway.turns.reactions import Reactions
from gateway.turns.replies import Replies, reply_text
from gateway.turns.settings import SessionSettingsBook, progress_for
from gateway.turns.stops import StopButtons, StoppedTurns, TurnStop, compact_now
from gateway.turns.streaming import StreamedReply, Streams

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
AgentFor = Callable[[str], CommonAgent]
"""The agent that runs a session key's turns."""
Awaiting = Callable[[str], Sequence[object]]
"""The session's approvals waiting for a person (no typing meanwhile)."""


class ProfileAgents:
    """The agent of each profile, and the one that runs a session key's turns: the
    profile its platform names (``platform_profiles``), else the default — a linked session
    (``link:dm:<person>``, :mod:`gateway.control.links`) runs the default. Each platform's
    agent is found once, here; a key only has its first field read (adapters.events)."""

    def __init__(
        self, agents: Mapping[str, CommonAgent], platform_profiles: Mapping[str, str], default: str
    ) -> None:
        self.by_name = dict(agents)
        self.default = self.by_name[default]
        self._of_platform = {
            platform: self.by_name.get(name) or self.default
            for platform, name in platform_profiles.items()
        }

    def of(self, session_key: str) -> CommonAgent:
        """The agent that runs ``session_key``'s turns."""
        return self._of_platform.get(session_key.partition(":")[0], self.default)


class LostSession(Protocol):
    """What a turn asks of the cluster (docs/cluster.md): implemented by
    :class:`gateway.cluster.node.ClusterNode`; None with one process (SQLite)."""

    async def fenced_out(self) -> bool:
        """The session of the work running in this context is no longer this process's."""
        ...


class ProgressViews:
    """The progress view of each turn running here, by session key (the turns open and
    close them; :class:`gateway.turns.running_steps.RunningSteps` reads them)."""

    def __init__(self) -> None:
        self._views: dict[str, ProgressView] = {}

    def of(self, session_key: str) -> ProgressView | None:
        """The progress view of the session's running turn (None: none runs here)."""
        return self._views.get(session_key)

    def open(self, session_key: str, view: ProgressView) -> None:
        self._views[session_key] = view

    def take(self, session_key: str) -> ProgressView | None:
        return self._views.pop(session_key, None)

    async def aclose(self) -> None:
        """Close the views of turns still open (at shutdown)."""
        for view in list(self._views.values()):
            await view.aclose()
        self._views.clear()


@dataclass(frozen=True, slots=True)
class TurnPacing:
    """How progress shows by default, and the clock and waits of views and typing."""

    progress: ProgressConfig
    clock: Callable[[], float]
    sleep: Sleep
    typing_sleep: Sleep
    typing_interval: float


class ChatTurns:
    """The Dispatcher's ports: run one turn with its chat plumbing, deliver its result.

    Its collaborators are given once, at construction (the composition builds them);
    ``reactions`` is None when ``[progress] reactions`` is off, ``streams`` when no bot
    streams (never called then).
    ``streams`` and ``lost`` may be replaced by the composition before the first turn
    (a test's streams on its clock; the cluster node once it joins)."""

    def __init__(
        self,
        pacing: TurnPacing,
        *,
        agent_for: AgentFor,
        settings: SessionSettingsBook,
        directory: ChatDirectory,
        views: ProgressViews,
        stops: StopButtons,
        stopped: StoppedTurns,
        awaiting: Awaiting,
        streams: Streams | None,
        intake: Intake,
        replies: Replies,
        files: FileDelivery,
        reactions: Reactions | None = None,
        lost: LostSession | None = None,
    ) -> None:
        self._pacing, self._agent_for, self._settings = pacing, agent_for, settings
        self._directory, self._views, self._stops = directory, views, stops
        self._stopped, self._awaiting, self._intake = stopped, awaiting, intake
        self._replies, self._files, self._reactions = replies, files, reactions
        self.streams, self.lost = streams, lost
        self._fenced: set[str] = set()
        """Sessions whose turn ended on a refused write (another process runs them now)."""

    async def aclose(self) -> None:
        """Close the progress views of turns still open (at shutdown)."""
        await self._views.aclose()

    async def run_turn(
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
        lost = self.lost
        return lost is not None and (await lost.fenced_out() or fenced)

    async def _turn(
        self, session_key: str, message: UserMessage, control: TurnControl
    ) -> TurnResult:
        agent = self._agent_for(session_key)
        settings = await self._settings.load(session_key)  # its /busy known from now (at once)
        place = self._directory.turn_place(session_key, message.origin)
        if self._reactions is not None:
            await self._reactions.started(message)
        if message.attachments:
            taken = await self._take_in(session_key, message, place, agent, control)
            if taken is None:
                return NOTHING_TO_RUN
            message = taken
        if place is None:
            if message.command == "compact":
                return await compact_now(agent, session_key, control, None)
            return await agent.run_turn(session_key, message, control)
        stops, streams = self._stops, self.streams
        capabilities = place.outbound.capabilities
        stop = TurnStop(stops, session_key, control, message.sender_id, capabilities)
        stream = streams.open(session_key, place, control.token) if streams else None
        pacing = self._pacing
        progress = progress_for(settings, pacing.progress)
        view = ProgressView(
            place.outbound, place.chat, progress, clock=pacing.clock, sleep=pacing.sleep,
            buttons=stop.buttons,
            shown_by=stream.show_step if stream is not None and stream.shows_progress else None,
        )  # fmt: skip
        self._views.open(session_key, view)
        quiet = partial(self._typing_paused, session_key, view)
        typing = Typing(
            place.outbound,
            place.chat,
            interval=pacing.typing_interval,
            sleep=pacing.typing_sleep,
            paused=quiet,
            delay=TYPING_DELAY,
        )
        try:
            live_text = capabilities.live_text
            async with typing, live_reply(place) if live_text else nullcontext() as live:
                if message.command == "compact":  # its slow notice and Stop in the view
                    return await compact_now(agent, session_key, control, view.notice)
                return await agent.run_turn(
                    session_key, message, control, step_callback=view.step, on_notice=view.notice,
                    on_text=stream or live, on_file=partial(self._files.queue, session_key, place),
                )  # fmt: skip
        except BaseException:
            self._views.take(session_key)
            await view.aclose()
            if streams is not None:
                await streams.discard(session_key)
            raise
        finally:
            if stop.stop_id is not None:  # its progress showed the Stop button
                stops.forget(stop.stop_id)

    async def _take_in(
        self, key: str, message: UserMessage, place: Place | None, agent: CommonAgent,
        control: TurnControl,
    ) -> UserMessage | None:  # fmt: skip
        """The message's files saved in the session's workspace (docs/attachments.md); None
        when nothing is left to run. ``/stop`` ends a download too."""
        workspaces = agent.profile.workspaces()
        workspace = await asyncio.to_thread(workspaces.ensure, key)
        return await control.token.guard(self._intake.take_in(key, message, place, workspace))

    def _typing_paused(self, session_key: str, view: ProgressView) -> bool:
        """No typing while a card waits for a person, nor in a shared chat (not a DM) once
        the progress message shows the turn is alive (chat actions count as group
        messages). The key is read only then: a quick answer never parses it."""
        if self._awaiting(session_key):
            return True
        return view.message is not None and parse_session_key(session_key).chat_type != "dm"

    async def on_result(self, session_key: str, message: UserMessage, result: TurnResult) -> None:
        """Deliver the reply (none after an acknowledged ``/stop``), then close the view.

        A delivery cut off (shutdown cancelled it mid rate-limit wait) or failed raises, so
        the message's ``handled`` outcome is False and a durable inbox replays the update
        rather than losing the reply (:mod:`core.dispatcher`, "Handled"). Nothing is sent
        for a session another process took over (it answers)."""
        view, streams = self._views.take(session_key), self.streams
        stream = streams.take(session_key) if streams is not None else None
        maybe_lost = self.lost is not None or session_key in self._fenced  # else: one process
        if maybe_lost and await self._lost_session(session_key):
            await _quiet_end(view, stream)
            self._directory.turn_ended(session_key)
            return
        stopped = bool(self._stopped) and self._stopped.was_stopped(result.turn_id)
        if self._reactions is not None:
            await self._reactions.ended(message, result)
        try:
            if stopped:
                logger.info("turn %s: /stop was acknowledged; its reply suppressed", result.turn_id)
            else:
                await self._replies.deliver(session_key, result, view, stream)
            files = self._files
            if session_key in files.pending:  # no file queued: file delivery is not entered
                await files.after_turn(session_key, result, stopped=stopped)
        finally:
            if stream is not None:  # stopped, or no reply: cleared (nothing once handed over)
                await stream.clear()
            if view is not None:
                remove = self._pacing.progress.becomes_reply and reply_text(result) is not None
                await view.finish("interrupted" if stopped else result.status, remove=remove)
            self._directory.turn_ended(session_key)


async def _quiet_end(view: ProgressView | None, stream: StreamedReply | None) -> None:
    """A turn's view and stream closed without a call to the platform."""
    if view is not None:
        await view.aclose()
    if stream is not None:
        await stream.aclose()
