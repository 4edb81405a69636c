"""``CommonAgent.run_turn``: one user message in, one reply (or a stop) out.

The steps, as ``docs/turn-loop.md`` §2 describes them:

1. **Session lock** — an ``asyncio.Lock`` per session key (:mod:`core.agent.session_lock`,
   evicted when idle): two turns of one key (or a turn and :meth:`CommonAgent.compact`)
   never overlap, Dispatcher or not. The wait is under the turn's token: stopped while
   waiting, the turn never begins (``interrupted``, empty ``turn_id``, no hooks).
2. **History** — opening the turn (:mod:`core.agent.opening`): the session and its
   history, a replayed update's stored message or answer, the turn record started, the
   user message and its files stored.
3. **System prompt** — restored or rebuilt there too
   (:meth:`core.agent.opening.TurnOpener.prepare`), the clock as a note on this turn's
   user message.
4. **Session hooks** (:mod:`core.agent.session_hooks`) — ``on_session_start`` for a new
   session, once: in its first turn whose record was started, even one stopped or failed
   before this step (then it fires at the finish, before ``agent_loop_stopped``/
   ``on_session_end``); ``pre_llm_call`` once per turn, its context sent in front of the
   user message and never stored. Each is called only when a hook is registered for it
   (:attr:`core.hooks.registry.HookRegistry.live`): with none, there is no step 4.
5. **Loop** — :class:`core.agent.turn_run.TurnRun` (or the external runtime,
   :mod:`core.agent.external`, when the profile names one).
6. **Finish** — ``agent_loop_stopped`` (with the reason) when the loop stopped early, the
   final status stored (``Store.finish_turn``), then ``on_session_end`` — for every turn
   whose record was started, also one that failed or was cancelled while opening (it ends
   ``failed``/``crashed`` or ``interrupted``/``cancelled``). These after-turn hooks run
   under the turn's token, each dispatch time-boxed to the registry's ``time_box`` (after
   a stop, to ``AFTER_STOP_SECONDS``): they never hold the session lock longer than that.

``run_turn`` never raises for a failed turn: a broken store, hook or bug ends the turn as
``failed``/``crashed`` with a readable reply; one whose session lease another process took
over (a write refused as ``Fenced``, docs/cluster.md) ends so too, said once at WARNING
without a traceback (:mod:`core.agent.lease_lost`). Only ``asyncio.CancelledError`` (the task
itself cancelled) propagates, and only after a started turn was recorded as
``interrupted``/``cancelled`` (time-boxed by :data:`CLEANUP_SECONDS`), with its stop and
session-end hooks; one cancelled while opening (its record being started, if it was
written) gets ``on_session_end`` only — its loop never ran. Cancelled before that, there
is no turn to record. Every hook call of the turn and the step
callback run under the turn's token, each async hook function time-boxed by the registry
(:data:`core.hooks.registry.HOOK_SECONDS`) and the step callback by
:data:`core.agent.step.OBSERVER_SECONDS`: ``/stop`` ends the turn ``interrupted`` within a
fraction of a second whatever a hook does (a sync hook that blocks the event loop is the
one thing nothing can stop). The turn's notice callback (``on_notice``) hears about a
model that is slow to answer (:class:`core.agent.step.ModelSlow`); its text callback
(``on_text``) gets the reply's text live when the profile streams (``docs/turn-loop.md`` §16).

Child agents (the ``delegate`` tool): ``ToolContext.run_child(task, token)`` runs a child
turn of this agent in the session ``"<parent key>/child:<turn id>:<call id>"`` (servers
reuse call ids such as ``call_1`` across turns) with a child of ``token`` (so stopping the
parent stops the child), the parent's ``IterationBudget`` and the parent message's sender
(so the user who asked can approve what the child wants to do).

The session's model: with a ``choose_model`` (the gateway's ``/model``,
:mod:`core.agent.model_choice`) the turn opens with the session's chosen client, its
``vision`` and ``stream``, and every model call asks again (a switch counts from the next
call); without one, or when it answers None, the profile's model serves.

Redirects are recorded the moment they arrive (:class:`core.agent.steer.RedirectRecorder`,
told by the turn's control while the loop runs); a steer or redirect the turn never
delivered stays on the ``TurnControl`` for the Dispatcher, which runs it as the next turn.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from functools import partial
from typing import Any

from core.agent.budget import IterationBudget, LoopGate
from core.agent.compaction import Compacted, Compactor, ContextLimits
from core.agent.context import ContextUse, summary_first
from core.agent.control import TurnControl
from core.agent.external import ExternalRuntime
from core.agent.lease_lost import is_lease_lost, lease_lost_end, log_lease_lost
from core.agent.model_call import ModelCaller
from core.agent.model_choice import ModelChoice, ModelChooser, SessionModel
from core.agent.opening import Opening, OpenTurn, TurnOpener
from core.agent.profile import AgentProfile
from core.agent.prompt import ContextSection, SoulFile
from core.agent.scope import TurnScope
from core.agent.session_hooks import after_turn, pre_llm_call, session_start
from core.agent.session_lock import SessionLocks
from core.agent.steer import RedirectRecorder, record_redirects
from core.agent.step import NoticeCallback, TextCallback
from core.agent.tool_runner import ToolEnvironment, ToolRunner
from core.agent.transcript import Transcript
from core.agent.turn import StepCallback, TurnResult, UserMessage
from core.agent.turn_run import TurnEnd, TurnParts, TurnRun, stop_end
from core.agent.usage import UsageMeter
from core.approver import ApprovalGate
from core.cancellation import CancellationToken, Cancelled
from core.hooks.registry import HookRegistry
from core.model.base import ModelClient, ModelRequest
from core.model.retry import RetryPolicy
from core.store.base import Store
from core.store.fencing import Fenced
from core.tools.base import QueueFile, RunChild, ToolRegistry
from core.types import ModelReply

logger = logging.getLogger(__name__)

CRASH_REPLY = "Something went wrong on our side while handling this message. Please try again."
CLEANUP_SECONDS = 5.0
"""Time box for recording a turn whose task was cancelled."""


class CommonAgent:
    def __init__(
        self,
        store: Store,
        model: ModelClient,
        tools: ToolRegistry,
        hooks: HookRegistry,
        approvals: ApprovalGate,
        profile: AgentProfile,
        *,
        clock: Callable[[], float] = time.time,
        retry: RetryPolicy | None = None,
        choose_model: ModelChooser | None = None,
        context_section: ContextSection | None = None,
        meter: UsageMeter | None = None,
    ) -> None:
        self.store = store
        self.model = model
        self.choose_model = choose_model
        """The session's model (``/model``, :mod:`core.agent.model_choice`); None: the
        profile's for every session."""
        self.tools = tools.subset(profile.tools) if profile.tools is not None else tools
        self.hooks = hooks
        self.approvals = approvals
        self.profile = profile
        self.clock = clock
        self.retry = retry or RetryPolicy()
        self.locks = SessionLocks()
        self.soul = SoulFile(profile.soul, profile.soul_path)
        self.opener = TurnOpener(
            store, model, self.tools, profile, self.soul, clock, profile.workspaces(),
            context_section,
        )  # fmt: skip
        """Steps 2–3 (:mod:`core.agent.opening`)."""
        self.meter = meter
        """Usage and quotas of every model call (:mod:`core.agent.usage`); None: none kept."""
        self.compactor = _compactor(store, model, self.retry, profile)
        """Context management (``docs/turn-loop.md`` §18); None when the window is unknown."""

    async def run_turn(
        self,
        session_key: str,
        message: UserMessage,
        control: TurnControl,
        *,
        step_callback: StepCallback | None = None,
        budget: IterationBudget | None = None,
        on_notice: NoticeCallback | None = None,
        on_text: TextCallback | None = None,
        on_file: QueueFile | None = None,
    ) -> TurnResult:
        """Run one turn of ``session_key`` (see the module docstring for every step);
        ``on_file`` takes the files the agent sends (``send_file``), None: it cannot."""
        if budget is None:
            budget = IterationBudget(self.profile.max_iterations)
        async with self.locks.hold(session_key, control.token) as held:
            if not held:  # stopped while another turn or a /compact held the session
                return _stopped_waiting(control)
            opening = Opening()
            try:
                opener = await self._opener(session_key)
                turn = await opener.open(session_key, message, control, budget, opening)
            except asyncio.CancelledError:
                if opening.scope is not None:
                    await _time_boxed(self._end_unopened(opening, control, stop_end(None)))
                raise
            except Exception as error:
                return await self._failed_open(session_key, opening, control, error)
            if isinstance(turn, TurnResult):
                return turn  # a replayed update whose answer is stored: no new turn
            turn.on_file = on_file
            return await self._drive(turn, opener, step_callback, on_notice, on_text)

    async def _choice(self, session_key: str) -> ModelChoice:
        """The session's model for the turn opening now (the profile's when none chosen)."""
        chosen = await self.choose_model(session_key) if self.choose_model else None
        profile = self.profile
        return chosen or ModelChoice(self.model, profile.vision, profile.stream)

    async def _opener(self, session_key: str) -> TurnOpener:
        """Steps 2–3 with the turn's model: its name in the prompt's fingerprint (a switch
        rebuilds the prefix, whose text does not name the model), its ``vision``. Without
        a chooser, the profile's (:attr:`opener`)."""
        if self.choose_model is None:
            return self.opener
        choice = await self._choice(session_key)
        profile = self.profile
        if choice == ModelChoice(self.model, profile.vision, profile.stream):
            return self.opener
        profile = replace(profile, vision=choice.vision, stream=choice.stream)
        return replace(self.opener, model=choice.client, profile=profile)

    async def _failed_open(
        self, key: str, opening: Opening, control: TurnControl, error: Exception
    ) -> TurnResult:
        """A turn that could not open: if its record was written, it ends ``failed``."""
        end = lease_lost_end(f"turn of {key}", error, CRASH_REPLY)
        if end is None:
            logger.exception("turn of %s could not start", key)
            end = TurnEnd("failed", "crashed", CRASH_REPLY, f"{type(error).__name__}: {error}")
        scope = opening.scope
        if scope is None or not await self._end_unopened(opening, control, end):
            return TurnResult(
                turn_id="",
                session_id="",
                status="failed",
                exit_reason="crashed",
                reply=CRASH_REPLY,
                iterations=0,
                error=str(error),
            )
        return _result(scope, end, 0)

    async def _end_unopened(self, opening: Opening, control: TurnControl, end: TurnEnd) -> bool:
        """End the record of a turn that never got under way, then ``on_session_start`` (a
        new session's) and ``on_session_end``; False (no hook) when the record was never
        written."""
        scope = opening.scope
        assert scope is not None
        try:
            await self.store.finish_turn(
                scope.turn_id, status=end.status, exit_reason=end.exit_reason, iterations=0
            )
        except Fenced as lost:  # the session is another process's now
            if not is_lease_lost(end):  # else said once already, where it was lost
                log_lease_lost(f"turn {scope.turn_id}", lost)
            return False
        except Exception as problem:  # the start never reached the store: nothing to end
            logger.info("turn %s ended before it was stored: %s", scope.turn_id, problem)
            return False
        live = self.hooks.live
        if opening.is_new and "on_session_start" in live:
            await after_turn(self.hooks, scope, control.token, "on_session_start")
        if "on_session_end" in live:
            await self._session_end(scope, control.token, end)
        return True

    # context (``/status``, ``/compact``; docs/turn-loop.md §18) ------------------------
    async def context_use(self, session_key: str) -> ContextUse | None:
        """How full the open session's next request would be; None without a session or
        a known window."""
        session = await self.store.get_active_session(session_key)
        if session is None or self.compactor is None:
            return None
        prompt = session.system_prompt or ""
        return await self.compactor.session_use(session.id, prompt, self.tools.specs())

    async def compact(
        self,
        session_key: str,
        control: TurnControl | None = None,
        on_notice: NoticeCallback | None = None,
    ) -> Compacted | None:
        """Compact the open session now (``/compact``), between turns (it waits for the
        session's lock); None when there is nothing to compact.

        Under ``control``'s token: a stop ends the lock wait or the summary call at once
        (``Cancelled`` is raised; nothing is stored). The summary call is the session's
        model through a :class:`ModelCaller` — ``pre_api_request``/``post_api_request``
        (``turn_id`` empty: no turn runs), retries, the slow notice to ``on_notice``
        (``docs/turn-loop.md`` §18)."""
        if self.compactor is None:
            return None
        token = (control or TurnControl()).token
        async with self.locks.hold(session_key, token) as held:
            if not held:
                raise Cancelled(token.reason or "cancelled")
            found = await self.store.load_active_session(session_key)
            if found is None:
                return None
            session = found.session
            transcript = Transcript("", summary_first(found.messages))
            scope = TurnScope(session_key, session.id, "")
            model = self._model_of(session_key, (await self._choice(session_key)).client)
            caller = ModelCaller(model, self.hooks, self.retry, scope, on_notice, meter=self.meter)

            def summarise(request: ModelRequest) -> Awaitable[ModelReply]:
                return caller.call(request, 1, token)

            return await self.compactor.compact(session.id, None, transcript, summarise)

    # an opened turn: the rest of steps 2–4, then 5–6 --------------------------------
    async def _drive(
        self,
        turn: OpenTurn,
        opener: TurnOpener,
        step_callback: StepCallback | None,
        on_notice: NoticeCallback | None = None,
        on_text: TextCallback | None = None,
    ) -> TurnResult:
        try:
            await opener.prepare(turn)
            live = self.hooks.live  # step 4: a hook nobody registered for is not called
            if "on_session_start" in live:
                await session_start(self.hooks, turn)
            if "pre_llm_call" in live:
                await pre_llm_call(self.hooks, turn)
            end = await self._watched_loop(turn, opener, step_callback, on_notice, on_text)
        except asyncio.CancelledError:
            cancelled = TurnEnd("interrupted", "cancelled", stopped_early=True)
            await _time_boxed(self._finish(turn, cancelled))
            raise
        except Cancelled as stopped:  # a hook aborted by /stop
            end = stop_end(stopped.reason)
        except Exception as error:  # a lost session lease is expected in a cluster
            lost = lease_lost_end(f"turn {turn.scope.turn_id}", error, CRASH_REPLY)
            if lost is None:
                logger.exception("turn %s crashed", turn.scope.turn_id)
            crash = f"{type(error).__name__}: {error}"
            end = lost or TurnEnd("failed", "crashed", CRASH_REPLY, crash)
        return await self._finish(turn, end)

    async def _watched_loop(
        self,
        turn: OpenTurn,
        opener: TurnOpener,
        step_callback: StepCallback | None,
        on_notice: NoticeCallback | None,
        on_text: TextCallback | None = None,
    ) -> TurnEnd:
        """The loop, with redirects recorded at once while it runs (and any straggler after)."""
        control = turn.control
        name = f"redirects:{turn.scope.turn_id}"
        recorder = RedirectRecorder(control, turn.transcript, self.store, name)
        control.recorder = recorder.arrived
        if control.unrecorded:  # came since the turn opened
            recorder.arrived()
        try:
            end = await self._loop(turn, opener, step_callback, on_notice, on_text)
        finally:
            control.recorder = None
            await recorder.stop()
        if turn.control.unrecorded:  # a straggler the watcher had no time for
            await record_redirects(turn.control, turn.transcript, self.store)
        return end

    async def _loop(
        self,
        turn: OpenTurn,
        opener: TurnOpener,
        step_callback: StepCallback | None,
        on_notice: NoticeCallback | None,
        on_text: TextCallback | None = None,
    ) -> TurnEnd:
        if self.profile.external_runtime:
            external = ExternalRuntime(
                self.profile.external_runtime, self.store, self.hooks, self.profile, self.clock
            )
            return await external.run(turn.scope, turn.transcript, turn.control, step_callback)
        turn.gate = LoopGate(self.profile.max_iterations, turn.budget)
        run = TurnRun(
            self._parts(turn, opener, on_notice, on_text),
            turn.scope,
            turn.transcript,
            turn.control,
            turn.gate,
            step_callback,
        )
        return await run.loop()

    def _parts(
        self,
        turn: OpenTurn,
        opener: TurnOpener,
        on_notice: NoticeCallback | None,
        on_text: TextCallback | None = None,
    ) -> TurnParts:
        scope = turn.scope
        model = self._model_of(scope.session_key, opener.model)
        caller = ModelCaller(
            model, self.hooks, self.retry, scope, on_notice, on_text, meter=self.meter
        )
        return TurnParts(
            store=self.store,
            hooks=self.hooks,
            profile=opener.profile,  # the turn's model's vision and stream
            clock=self.clock,
            specs=self.tools.specs(),
            caller=caller,
            runner=partial(self._tool_runner, turn, opener.profile.vision),
            compactor=self.compactor,
        )

    def _tool_runner(self, turn: OpenTurn, vision: bool) -> ToolRunner:
        """The turn's tool runner, built at its first tool call (a turn that calls none
        never builds it)."""
        env = ToolEnvironment(
            tools=self.tools,
            hooks=self.hooks,
            approvals=self.approvals,
            store=self.store,
            scope=turn.scope,
            token=turn.control.token,
            workspace=turn.workspace,
            clock=self.clock,
            child_runner=lambda call_id: self._child_runner(call_id, turn),
            queue_file=turn.on_file,
            vision=vision,
        )
        return ToolRunner(env)

    def _model_of(self, session_key: str, opened_with: ModelClient) -> ModelClient:
        """The turn's model calls: the session's asked for again at each call when a
        chooser is given (a ``/model`` switch counts from the next call)."""
        if self.choose_model is None:
            return opened_with
        return SessionModel(session_key, self.choose_model, self.model)

    def _child_runner(self, call_id: str, turn: OpenTurn) -> RunChild:
        scope, sender = turn.scope, turn.message

        async def run_child(task: str, token: CancellationToken) -> str:
            child = TurnControl(token=token.child())
            key = f"{scope.session_key}/child:{scope.turn_id}:{call_id}"
            message = UserMessage(task, sender.sender_id, sender.sender_name)
            result = await self.run_turn(
                key, message, child, budget=turn.budget, on_file=turn.on_file
            )
            return describe_child(result)

        return run_child

    async def _finish(self, turn: OpenTurn, end: TurnEnd) -> TurnResult:
        if "on_session_start" in self.hooks.live:  # a first turn that ended before step 4
            await session_start(self.hooks, turn)
        iterations = turn.gate.calls if turn.gate is not None else end.iterations
        return await self._close(turn.scope, turn.control.token, end, iterations)

    async def _close(
        self, scope: TurnScope, token: CancellationToken, end: TurnEnd, iterations: int
    ) -> TurnResult:
        """Step 6 for every started turn: stop hook, final status stored, session end."""
        live = self.hooks.live
        if end.stopped_early and "agent_loop_stopped" in live:
            await after_turn(self.hooks, scope, token, "agent_loop_stopped", reason=end.exit_reason)
        try:
            await self.store.finish_turn(
                scope.turn_id,
                status=end.status,
                exit_reason=end.exit_reason,
                iterations=iterations,
                error=end.error,
                session_id=scope.session_id,  # its last activity, in the same write
            )
        except Fenced as lost:
            if not is_lease_lost(end):  # said once, where the turn lost its lease
                log_lease_lost(f"turn {scope.turn_id}", lost)
        except Exception:
            logger.exception("turn %s: final status not stored", scope.turn_id)
        if "on_session_end" in live:
            await self._session_end(scope, token, end)
        return _result(scope, end, iterations)

    async def _session_end(self, scope: TurnScope, token: CancellationToken, end: TurnEnd) -> None:
        status, reason = end.status, end.exit_reason
        await after_turn(
            self.hooks, scope, token, "on_session_end", status=status, exit_reason=reason
        )


def _compactor(
    store: Store, model: ModelClient, retry: RetryPolicy, profile: AgentProfile
) -> Compactor | None:
    if profile.context_window is None:
        return None
    limits = ContextLimits(profile.context_window, profile.compact_at)
    return Compactor(store, model, retry, limits)


def _stopped_waiting(control: TurnControl) -> TurnResult:
    """A turn stopped while it waited for its session's lock: it never began (no record,
    no hooks, its message not stored)."""
    end = stop_end(control.token.reason)
    return TurnResult(
        turn_id="",
        session_id="",
        status=end.status,
        exit_reason=end.exit_reason,
        reply=None,
        iterations=0,
    )


def _result(scope: TurnScope, end: TurnEnd, iterations: int) -> TurnResult:
    """What a started turn's caller gets: its ids, and how it ended."""
    return TurnResult(
        turn_id=scope.turn_id,
        session_id=scope.session_id,
        status=end.status,
        exit_reason=end.exit_reason,
        reply=end.reply,
        iterations=iterations,
        error=end.error,
    )


def describe_child(result: TurnResult) -> str:
    """What the parent's ``delegate`` tool gets back from a child turn."""
    if result.status == "completed":
        return result.reply or ""
    detail = result.error or result.reply or ""
    return f"[child agent {result.status}: {result.exit_reason}] {detail}".rstrip()


async def _time_boxed(work: Coroutine[Any, Any, object]) -> None:
    """Run cleanup after the task was cancelled: in its own task, for a bounded time.

    Cleanup that overruns (or a second cancellation) cancels it and awaits it, itself
    time-boxed (:func:`CancellationToken.time_boxed`); it is never left unawaited.
    """
    try:
        await CancellationToken.time_boxed(work, CLEANUP_SECONDS)
    except TimeoutError:
        logger.warning("turn cleanup did not finish within %ss", CLEANUP_SECONDS)
    except Exception:
        logger.exception("turn cleanup failed")
