"""The loop of one turn (``docs/turn-loop.md`` §3, §8, §9).

Each iteration, in this order::

    interrupt check        token cancelled → interrupted (interrupted_by_user | cancelled)
    review input budget    aggregate prompt tokens ≥ budget → review_input_budget_exhausted
    loop gate              (calls < max_iterations and budget.remaining > 0) or grace_call
    step_callback          every iteration (``prev_tools`` empty on the first)
                           before the steer drain, so results carry no steer markers
    wrap-up reminder       80 % of run_budget_seconds → one-shot note via the steer channel
    steer channel          redirect, /steer and notes land on the latest tool result
    model call             pre_api_request → call → post_api_request (retries, hooks)
    store the reply        the assistant message, as the model sent it (never one with
                           neither text nor tool calls: ``docs/turn-loop.md`` §3)
    no tool calls          transform_llm_output, post_llm_call → finish; the chat's reply
                           says when the answer was cut off or empty (``answer.py``)
    tool calls             run the batch, store the results in the model's order, loop

Every hook and the step callback run under the turn's token (each async hook function
also time-boxed by its registry, the step callback by ``core.agent.step``): ``/stop``
ends the turn whatever they do. Every way out is a :class:`TurnEnd`; nothing raises out
of :meth:`TurnRun.loop` except ``asyncio.CancelledError`` (the task itself was cancelled).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from core.agent.answer import shown_answer, without_tool_markup
from core.agent.budget import CallKind, LoopGate, WrapUpReminder
from core.agent.compaction import (
    Compactor,
    ContextKeeper,
    ContextOverflow,
    SummaryRefused,
)
from core.agent.control import TurnControl
from core.agent.model_call import ModelCaller, readable_failure
from core.agent.profile import AgentProfile
from core.agent.scope import TurnScope
from core.agent.steer import SteerChannel
from core.agent.step import notify_step, prev_tools
from core.agent.tool_runner import CallOutcome, ToolRunner
from core.agent.transcript import Entry, Transcript, replace_reply_text, store_reply
from core.agent.turn import StepCallback
from core.agent.usage import QuotaReached
from core.cancellation import Cancelled
from core.hooks.registry import HookRegistry
from core.model.base import ModelRequest
from core.model.errors import ModelError
from core.store.base import Store
from core.types import ChatMessage, ExitReason, ModelReply, ToolSpec, TurnStatus

GRACE_NOTE = (
    "[Iteration budget exhausted] No more tool calls are possible in this turn. "
    "Answer the user now with what you already have."
)


@dataclass(frozen=True, slots=True)
class TurnEnd:
    status: TurnStatus
    exit_reason: ExitReason
    reply: str | None = None
    error: str | None = None
    stopped_early: bool = False
    """The loop stopped before a normal reply: ``agent_loop_stopped`` fires."""
    iterations: int = 0
    """Steps taken, when no ``LoopGate`` counted them (the external runtime)."""


def stop_end(reason: str | None) -> TurnEnd:
    """A cancelled turn; the Dispatcher's ``interrupt`` policy cancels with its own reason."""
    exit_reason: ExitReason = (
        "interrupted_by_user" if reason == "interrupted_by_user" else "cancelled"
    )
    return TurnEnd("interrupted", exit_reason, stopped_early=True)


def quota_end(reached: QuotaReached) -> TurnEnd:
    """A model call refused by the usage meter: the chat hears which quota, and when it
    resets (``docs/turn-loop.md`` §4)."""
    return TurnEnd("budget_exhausted", "quota_exceeded", reached.reply, stopped_early=True)


def budget_end(calls: int) -> TurnEnd:
    return TurnEnd("budget_exhausted", "budget_exhausted", budget_text(calls), stopped_early=True)


def budget_text(calls: int) -> str:
    """The reply of a turn the loop gate ended without an answer (``docs/turn-loop.md`` §8)."""
    return f"I ran out of my iteration budget ({calls} model calls) before finishing."


def review_budget_end(used: int, budget: int) -> TurnEnd:
    """The review input budget is spent: the chat hears it (``docs/turn-loop.md`` §8, §9)."""
    reply = f"I ran out of my input budget ({used:,} of {budget:,} tokens) before finishing."
    return TurnEnd("budget_exhausted", "review_input_budget_exhausted", reply, stopped_early=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnParts:
    store: Store
    hooks: HookRegistry
    profile: AgentProfile
    clock: Callable[[], float]
    specs: Sequence[ToolSpec]
    caller: ModelCaller
    runner: Callable[[], ToolRunner]
    """Builds the turn's tool runner: called at the turn's first tool call, never for a
    turn that calls none."""
    compactor: Compactor | None = None
    """Context management (``docs/turn-loop.md`` §18); None: the window is unknown."""


class TurnRun:
    def __init__(
        self,
        parts: TurnParts,
        scope: TurnScope,
        transcript: Transcript,
        control: TurnControl,
        gate: LoopGate,
        step_callback: StepCallback | None,
    ) -> None:
        self._parts = parts
        self._scope = scope
        self._transcript = transcript
        self._control = control
        self.gate = gate
        self._step_callback = step_callback
        self._steer = SteerChannel(control, transcript, parts.store)
        seconds = parts.profile.run_budget_seconds
        self._wrap_up = WrapUpReminder(parts.clock, seconds) if seconds is not None else None
        """The wrap-up reminder (``docs/turn-loop.md`` §11); None: no run budget."""
        self._context = ContextKeeper(
            parts.compactor, scope, transcript, self._summary_call, parts.specs
        )
        self.input_tokens = 0
        self._runner: ToolRunner | None = None
        """Built at the first tool call (:attr:`TurnParts.runner`)."""

    async def loop(self) -> TurnEnd:
        while True:
            end = self._between_iterations()
            if end is not None:
                return end
            kind = self.gate.next_call()
            if kind is None:
                return budget_end(self.gate.calls)
            end = await self._iteration(kind)
            if end is not None:
                return end

    def _between_iterations(self) -> TurnEnd | None:
        token = self._control.token
        if token.cancelled:
            return stop_end(token.reason)
        budget = self._parts.profile.review_input_budget
        if budget is not None and self.input_tokens >= budget:
            return review_budget_end(self.input_tokens, budget)
        return None

    async def _iteration(self, kind: CallKind) -> TurnEnd | None:
        await self._prepare_call()
        try:
            reply = await self._call_model(kind)
        except Cancelled as stopped:
            return stop_end(stopped.reason)
        except QuotaReached as reached:
            return quota_end(reached)
        except SummaryRefused:  # an overflow with no model call left to compact and re-send
            return budget_end(self.gate.calls)
        except ContextOverflow as overflow:  # compacted and retried: still too long
            error = str(overflow)
            return TurnEnd("failed", "model_error", overflow.reply, error, stopped_early=True)
        except ModelError as error:
            text = readable_failure(error)
            return TurnEnd("failed", "model_error", text, str(error), stopped_early=True)
        self.input_tokens += reply.usage.prompt_tokens
        reply, markup = without_tool_markup(reply)
        if kind == "grace":
            reply = self._grace_reply(reply)
        entry = await store_reply(
            self._parts.store, self._scope, self._transcript, reply.to_message()
        )
        if not reply.tool_calls:
            try:
                return await self._final(reply, kind, entry, markup)
            except Cancelled as stopped:  # /stop while an after-reply hook ran
                return stop_end(stopped.reason)
        return await self._run_tools(reply)

    def _grace_reply(self, reply: ModelReply) -> ModelReply:
        """The grace call's answer without tool calls; with no text left, the budget's own
        reply stands in, so no empty assistant message is stored (``docs/turn-loop.md`` §9)."""
        said = (reply.content or "").strip()
        content = reply.content if said else budget_text(self.gate.calls)
        return replace(reply, content=content, tool_calls=())

    async def _prepare_call(self) -> None:
        if self._step_callback is not None:
            transcript = self._transcript  # only its user message yet: no tool called
            called = len(transcript.entries) > transcript.turn_start + 1
            tools = prev_tools(transcript.turn_messages()) if called else []
            await notify_step(self._step_callback, self.gate.calls, tools, self._control.token)
        if self._wrap_up is not None and self._wrap_up.due():
            self._steer.add_note(self._wrap_up.text())
        await self._steer.deliver()

    async def _call_model(self, kind: CallKind) -> ModelReply:
        extra: dict[str, object] = {"tool_choice": "none"} if kind == "grace" else {}

        def build(messages: list[ChatMessage]) -> ModelRequest:
            return ModelRequest(
                messages=messages,
                tools=self._parts.specs,
                stream=self._parts.profile.stream,
                extra=extra,
            )

        sent = 0

        def send(request: ModelRequest) -> Awaitable[ModelReply]:
            nonlocal sent
            sent += 1
            if sent > 1 and not self.gate.admit_extra():  # the re-send after an overflow
                raise SummaryRefused
            return self._parts.caller.call(request, self.gate.calls, self._control.token)

        return await self._context.call(build, send)

    async def _summary_call(self, request: ModelRequest) -> ModelReply:
        """A compaction summary inside this turn: one more model call of the turn, with
        its hooks, retries and slow notice, under the token; its prompt tokens count
        toward the review input budget (``docs/turn-loop.md`` §4)."""
        if not self.gate.admit_extra():
            raise SummaryRefused
        reply = await self._parts.caller.call(request, self.gate.calls, self._control.token)
        self.input_tokens += reply.usage.prompt_tokens
        return reply

    async def _final(
        self, reply: ModelReply, kind: CallKind, entry: Entry | None, markup: bool
    ) -> TurnEnd:
        """The answer: hooks on its text, then the chat's reply says when it was cut off,
        empty or an unreadable tool call (``docs/turn-loop.md`` §17)."""
        raw = text = reply.content or ""
        hooks, token = self._parts.hooks, self._control.token
        token.raise_if_cancelled()  # a /stop that came with the answer ends the turn stopped
        if "transform_llm_output" in hooks.live:
            work = hooks.transform("transform_llm_output", raw, **self._scope.common)
            text = await hooks.guarded("transform_llm_output", token, work)
        if text != raw:
            store = self._parts.store
            await replace_reply_text(store, self._scope, self._transcript, entry, text)
        if "post_llm_call" in hooks.live:
            told = hooks.notify("post_llm_call", **self._scope.common, reply=text)
            await hooks.guarded("post_llm_call", token, told)
        shown = shown_answer(text, reply.finish_reason, markup)
        if kind == "grace":
            exhausted = budget_end(self.gate.calls)
            return replace(exhausted, reply=shown) if text else exhausted
        return TurnEnd("completed", "text_response", shown)

    async def _store_tool_message(self, outcome: CallOutcome) -> None:
        """Store the call's result; its images (a vision model's) stay in memory."""
        message = _tool_message(outcome)
        stored_id = await self._parts.store.append_message(
            self._scope.session_id, self._scope.turn_id, message
        )
        self._transcript.add(message, stored_id, outcome.images)

    async def _run_tools(self, reply: ModelReply) -> TurnEnd | None:
        if self._runner is None:
            self._runner = self._parts.runner()
        outcomes = await self._runner.run_batch(reply.tool_calls)
        for outcome in outcomes:
            await self._store_tool_message(outcome)
        if any(o.cancelled for o in outcomes):
            return stop_end(self._control.token.reason)
        if self.gate.grant_grace_if_closed():
            self._steer.add_note(GRACE_NOTE)
        return None


def _tool_message(outcome: CallOutcome) -> ChatMessage:
    return ChatMessage(
        role="tool", content=outcome.text, tool_call_id=outcome.call.id, name=outcome.call.name
    )
