"""Running the tool calls of one model response (``docs/turn-loop.md`` §5, §6).

A batch runs in parallel, unless one of its tools is interactive (it asks the user
something); then the calls run one at a time. Outcomes come back in the order the model
asked for them. For each call:

1. look the tool up — an unknown name, or arguments that are not a JSON object, become an
   error result (the model can correct itself), never a crash; a call whose arguments the
   model client found not to be JSON (``ToolCall.unparsed``, a generation cut off inside
   them) is never run, and its error result quotes the broken text;
2. fire ``pre_tool_call`` (tool_name, arguments, risk, call_id, session_key, session_id,
   turn_id) — every hook is asked and the results combine by precedence
   (:meth:`HookRegistry.decide`): any ``Block`` wins, then ``AskUser``, then ``Modify``.
   ``Modify`` changes are merged into the arguments and the hooks are asked again about
   the modified call (at most :data:`DECISION_ROUNDS` rounds, until the arguments settle;
   still changing after that → blocked), so the policies judge what will really run —
   a ``Modify`` that turns ``echo hi`` into ``rm -rf …`` gets the approval card;
3. act on it: ``Block(reason)`` → ``Blocked: <reason>``; ``AskUser(prompt)`` (from any
   round) → ask the approval gate about the final arguments, anything but ``approved`` →
   ``Not approved (<outcome>)``, and ``cancelled`` stops the turn. A decision hook that
   raises blocks the call (a broken policy must not allow a dangerous call), and so does a
   result that is none of these (or a ``Modify`` whose args are not a dict):
   ``Blocked: invalid pre_tool_call result (<type>)``, logged;
4. run the handler under the turn's token; an exception becomes an error result; the
   images its result names are read for a vision model (:mod:`core.agent.tool_images`).
   The result is an edge (:mod:`core.text`): its text — a command's output, an MCP
   server's answer, a file name from the sandbox, an exception's message — has its lone
   surrogates replaced with U+FFFD here, where it enters the turn;
5. fire ``post_tool_call`` — for blocked, failed and cancelled calls too;
6. ``transform_tool_result`` may replace the text;
7. store the call's end (``Store.finish_tool_call``) with its approval id and outcome.

The call's record follows it as it goes, so after a crash it says how far the call got:
opened ``requested`` before anything is decided (``Store.open_tool_call``), then
``awaiting_approval`` while a person is asked, ``started`` just before the handler runs, and
at the end ``finished``, ``blocked``, ``denied``, ``timed_out`` or ``cancelled``. A call whose
task is cancelled (shutdown) keeps the state it had reached.

Every hook call runs under the turn's token (``token.guard``): ``/stop`` aborts a hook
that hangs. After a call was cancelled, ``post_tool_call`` and ``transform_tool_result``
still fire, time-boxed to :data:`AFTER_STOP_SECONDS`.

A call stopped by cancellation yields ``cancelled=True`` with :data:`CANCELLED_RESULT` as its
text, so the stored history stays valid (every tool call has a result) and the loop ends
the turn.

Each call is a ``tool.call`` span (:mod:`core.tracing`: tool name, ``unknown`` for one no
tool has; status, error, whether a person was asked), each question to a person an
``approval.wait`` span inside it (its outcome); never the arguments or the result.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from core import tracing
from core.agent.scope import TurnScope
from core.agent.tool_images import ToolImage, loaded
from core.approver import ApprovalGate, Decision, RequestKind
from core.cancellation import CancellationToken, Cancelled
from core.hooks.registry import HookRegistry, InvalidDecision, Verdict
from core.hooks.results import AskUser, Block, Modify
from core.store.base import Store, ToolCallRecord, ToolCallStatus
from core.text import valid_text
from core.tools.base import (
    AskChoice,
    Choice,
    QueueFile,
    RunChild,
    Tool,
    ToolContext,
    ToolRegistry,
)
from core.tools.clarify import ChoiceNotMade
from core.types import ApprovalState, ToolCall

T = TypeVar("T")

logger = logging.getLogger(__name__)

AFTER_STOP_SECONDS = 0.1
"""Time box for the after-call hooks of a call the turn's stop cancelled."""

DECISION_ROUNDS = 3
"""``pre_tool_call`` rounds at most: a ``Modify`` sends the modified call round again."""

KEPT_CHANGING = "pre_tool_call hooks kept changing the arguments"

CANCELLED_RESULT = "Cancelled: the turn was stopped before this tool finished."

ChildRunnerFactory = Callable[[str], RunChild]
"""Given a call id, the ``run_child`` for that call's ``ToolContext``."""


@dataclass(frozen=True, slots=True)
class CallOutcome:
    call: ToolCall
    text: str
    is_error: bool
    cancelled: bool = False
    images: tuple[ToolImage, ...] = ()
    """The images the result returned, read for a vision model (memory only)."""


@dataclass(slots=True)
class _Attempt:
    text: str
    is_error: bool
    images: tuple[ToolImage, ...] = ()
    arguments: dict[str, Any] | None = None
    blocked: bool = False
    cancelled: bool = False
    approval_id: str | None = None
    approval: ApprovalState | None = None


@dataclass(frozen=True, slots=True)
class ToolEnvironment:
    """What every call of a turn shares."""

    tools: ToolRegistry
    hooks: HookRegistry
    approvals: ApprovalGate
    store: Store
    scope: TurnScope
    token: CancellationToken
    workspace: Path
    """The session's workspace (:meth:`AgentProfile.session_workspace`): ``ToolContext``'s."""
    clock: Callable[[], float]
    child_runner: ChildRunnerFactory | None = None
    queue_file: QueueFile | None = None
    """``run_turn``'s ``on_file``: ``ToolContext.queue_file`` (the ``send_file`` tool)."""
    vision: bool = False
    """The turn's model accepts images: a result's images are read for it."""


class ToolRunner:
    def __init__(self, env: ToolEnvironment) -> None:
        self._env = env
        self._rows: dict[int, int] = {}
        """Store row (``seq``) of each call in flight, by the identity of its ``ToolCall``
        (call ids from the model are not guaranteed unique within a batch)."""

    async def run_batch(self, calls: tuple[ToolCall, ...]) -> list[CallOutcome]:
        if any(self._interactive(c) for c in calls):
            return [await self.run_one(c) for c in calls]
        async with asyncio.TaskGroup() as group:  # a failure cancels the siblings
            tasks = [group.create_task(self.run_one(c)) for c in calls]
        return [task.result() for task in tasks]

    def _interactive(self, call: ToolCall) -> bool:
        tool = self._env.tools.get(call.name)
        return tool is not None and tool.spec.interactive

    async def run_one(self, call: ToolCall) -> CallOutcome:
        known = self._env.tools.get(call.name) is not None  # a made-up name is not told
        with tracing.span("tool.call", **{"tool.name": call.name if known else "unknown"}) as span:
            outcome, attempt = await self._run_one(call)
            span.set("tool.status", end_status(attempt))
            span.set("tool.error", attempt.is_error)
            span.set("approval.needed", attempt.approval is not None)
            return outcome

    async def _run_one(self, call: ToolCall) -> tuple[CallOutcome, _Attempt]:
        started = self._env.clock()
        self._rows[id(call)] = await self._env.store.open_tool_call(
            self._record_of(call, None, "", started, None)
        )
        try:
            try:
                attempt = await self._attempt(call)
            except Cancelled:
                attempt = _Attempt(CANCELLED_RESULT, is_error=True, cancelled=True)
            text = await self._after_call(call, attempt)
            if text is not attempt.text:  # a transform_tool_result hook's text enters too
                text = entered(text)
            await self._record(call, attempt, text, started)
        finally:
            self._rows.pop(id(call), None)
        outcome = CallOutcome(call, text, attempt.is_error, attempt.cancelled, attempt.images)
        return outcome, attempt

    async def _advance(
        self, call: ToolCall, status: ToolCallStatus, approval_id: str | None = None
    ) -> None:
        """Move the call's record on before the step begins (a crash then tells)."""
        seq = self._rows.get(id(call))
        if seq is not None:
            await self._env.store.set_tool_call_status(seq, status, approval_id=approval_id)

    async def _after_call(self, call: ToolCall, attempt: _Attempt) -> str:
        """``post_tool_call`` then ``transform_tool_result``; the text the model gets."""
        try:
            await self._hook(self._post(call, attempt))
            return await self._hook(
                self._env.hooks.transform(
                    "transform_tool_result",
                    attempt.text,
                    **self._env.scope.common,
                    tool_name=call.name,
                    call_id=call.id,
                    is_error=attempt.is_error,
                )
            )
        except (Cancelled, TimeoutError):
            attempt.cancelled = True
            return attempt.text

    async def _hook(self, work: Awaitable[T]) -> T:
        """A hook call ``/stop`` can abort; once stopped, a short time box instead."""
        token = self._env.token
        if not token.cancelled:
            return await token.guard(work)
        return await CancellationToken.time_boxed(work, AFTER_STOP_SECONDS)

    async def _attempt(self, call: ToolCall) -> _Attempt:
        self._env.token.raise_if_cancelled()
        tool = self._env.tools.get(call.name)
        if tool is None:
            known = ", ".join(self._env.tools.names()) or "none"
            return _Attempt(f"Unknown tool: {call.name!r} (available: {known})", is_error=True)
        if call.unparsed is not None:
            return _Attempt(unparsed_result(call.name, call.unparsed), is_error=True)
        arguments, problem = parse_arguments(call.arguments)
        if arguments is None:
            return _Attempt(f"Invalid arguments for {call.name}: {problem}", is_error=True)
        return await self._decide_and_run(tool, call, arguments)

    async def _decide_and_run(
        self, tool: Tool, call: ToolCall, arguments: dict[str, Any]
    ) -> _Attempt:
        try:
            verdict, arguments = await self._decide(tool, call, arguments)
        except Cancelled:
            raise
        except InvalidDecision as invalid:
            return _invalid_decision(call, invalid.result, arguments)
        except Exception as error:
            text = f"Blocked: pre_tool_call policy failed ({type(error).__name__}: {error})"
            return _Attempt(text, is_error=True, arguments=arguments, blocked=True)
        if verdict.block is not None:
            text = f"Blocked: {verdict.block.reason}"
            return _Attempt(text, is_error=True, arguments=arguments, blocked=True)
        if verdict.ask is not None:
            return await self._ask_then_run(tool, call, arguments, verdict.ask.prompt)
        return await self._invoke(tool, call, arguments)

    async def _decide(
        self, tool: Tool, call: ToolCall, arguments: dict[str, Any]
    ) -> tuple[Verdict, dict[str, Any]]:
        """``pre_tool_call`` until the arguments settle: the verdict and the final arguments."""
        asked: AskUser | None = None
        for _ in range(DECISION_ROUNDS):
            verdict = await self._env.token.guard(
                self._env.hooks.decide(
                    "pre_tool_call",
                    **self._env.scope.common,
                    tool_name=call.name,
                    arguments=dict(arguments),
                    risk=tool.spec.risk,
                    call_id=call.id,
                )
            )
            asked = verdict.ask or asked
            changed = {**arguments, **(verdict.changes or {})}
            if verdict.block is not None or changed == arguments:
                return Verdict(block=verdict.block, ask=asked), arguments
            arguments = changed
        return Verdict(block=Block(KEPT_CHANGING)), arguments

    async def _ask_then_run(
        self, tool: Tool, call: ToolCall, arguments: dict[str, Any], prompt: str
    ) -> _Attempt:
        decision = await self._ask(call, arguments, prompt)
        if decision.outcome == "approved":
            attempt = await self._invoke(tool, call, arguments)
        elif decision.outcome == "cancelled":
            attempt = _Attempt(CANCELLED_RESULT, is_error=True, blocked=True, cancelled=True)
        else:
            note = f": {decision.note}" if decision.note else ""
            text = f"Not approved ({decision.outcome}){note}"
            attempt = _Attempt(text, is_error=True, blocked=True)
        attempt.arguments = arguments
        attempt.approval_id, attempt.approval = _request_id(decision), decision.outcome
        return attempt

    async def _ask(self, call: ToolCall, arguments: dict[str, Any], prompt: str) -> Decision:
        await self._advance(call, "awaiting_approval")
        return await self._question("approval", call, arguments, prompt)

    async def _question(
        self,
        kind: RequestKind,
        call: ToolCall,
        arguments: dict[str, Any],
        prompt: str,
        choices: tuple[str, ...] = (),
    ) -> Decision:
        """Ask a person about ``call`` (an approval, or a choice among ``choices``) and
        wait, as an ``approval.wait`` span: its kind, then its outcome."""
        scope = self._env.scope
        with tracing.span("approval.wait", **{"approval.kind": kind}) as span:
            decision = await self._env.approvals.ask(
                kind=kind, session_key=scope.session_key, session_id=scope.session_id,
                turn_id=scope.turn_id, call_id=call.id, tool=call.name, arguments=arguments,
                prompt=prompt, requested_by=scope.requested_by, token=self._env.token,
                choices=choices,
            )  # fmt: skip
            span.set("approval.outcome", decision.outcome)
            return decision

    async def _invoke(self, tool: Tool, call: ToolCall, arguments: dict[str, Any]) -> _Attempt:
        context = self._context(call, arguments)
        await self._advance(call, "started")
        try:
            result = await self._env.token.guard(tool.handler(arguments, context))
        except Cancelled:
            raise
        except Exception as error:
            text = f"Tool {call.name} failed: {type(error).__name__}: {error}"
            return _Attempt(valid_text(text), is_error=True, arguments=arguments)
        images = await loaded(result.images, self._env.workspace) if self._env.vision else ()
        return _Attempt(entered(result.text), result.is_error, images, arguments=arguments)

    def _context(self, call: ToolCall, arguments: dict[str, Any]) -> ToolContext:
        scope, env = self._env.scope, self._env
        child = env.child_runner(call.id) if env.child_runner is not None else None
        return ToolContext(
            session_key=scope.session_key,
            session_id=scope.session_id,
            turn_id=scope.turn_id,
            call_id=call.id,
            token=env.token,
            workspace=env.workspace,
            ask_choice=self._choice_asker(call, arguments),
            run_child=child,
            queue_file=env.queue_file,
            requested_by=scope.requested_by,
        )

    def _choice_asker(self, call: ToolCall, arguments: dict[str, Any]) -> AskChoice:
        async def ask_choice(choice: Choice) -> str | None:
            decision = await self._question(
                "choice", call, arguments, choice.question, choice.choices
            )
            if decision.outcome == "approved":
                return decision.choice
            if decision.outcome == "timed_out":
                return None
            raise ChoiceNotMade(decision.outcome)

        return ask_choice

    async def _post(self, call: ToolCall, attempt: _Attempt) -> None:
        await self._env.hooks.notify(
            "post_tool_call",
            **self._env.scope.common,
            tool_name=call.name,
            arguments=attempt.arguments,
            call_id=call.id,
            result=attempt.text,
            is_error=attempt.is_error,
            blocked=attempt.blocked,
            cancelled=attempt.cancelled,
        )

    async def _record(self, call: ToolCall, attempt: _Attempt, text: str, started: float) -> None:
        """Write the call's end onto its open row (or the whole call, if it has none)."""
        record = self._record_of(call, attempt, text, started, self._env.clock())
        seq = self._rows.get(id(call))
        if seq is None:
            await self._env.store.record_tool_call(record)
        else:
            await self._env.store.finish_tool_call(seq, record)

    def _record_of(
        self,
        call: ToolCall,
        attempt: _Attempt | None,
        text: str,
        started: float,
        finished: float | None,
    ) -> ToolCallRecord:
        """The call's record: opened (``attempt`` None, ``requested``) or ended."""
        scope = self._env.scope
        parsed = attempt.arguments if attempt is not None else None
        return ToolCallRecord(
            call_id=call.id,
            turn_id=scope.turn_id,
            session_id=scope.session_id,
            name=call.name,
            arguments=json.dumps(parsed) if parsed is not None else call.arguments,
            result=text,
            is_error=attempt.is_error if attempt is not None else False,
            started_at=started,
            finished_at=finished,
            approval_id=attempt.approval_id if attempt is not None else None,
            approval_outcome=attempt.approval if attempt is not None else None,
            status=end_status(attempt) if attempt is not None else "requested",
        )


def entered(text: str) -> str:
    """A tool's result text as it enters the turn: valid (:func:`core.text.valid_text`).
    A result that is not text is passed on as it is (the store refuses it: the turn
    crashes, as any broken tool contract does)."""
    return valid_text(text) if isinstance(text, str) else text


def end_status(attempt: _Attempt) -> ToolCallStatus:
    """How a call that came back ended, for its record."""
    if attempt.approval in ("denied", "timed_out"):
        return attempt.approval
    if attempt.cancelled:
        return "cancelled"
    if attempt.blocked:
        return "blocked"
    return "finished"


def _invalid_decision(call: ToolCall, decision: object, arguments: dict[str, Any]) -> _Attempt:
    kind = type(decision.args if isinstance(decision, Modify) else decision).__name__
    logger.error(
        "pre_tool_call for %s (%s) returned an invalid result: %r", call.name, call.id, decision
    )
    text = f"Blocked: invalid pre_tool_call result ({kind})"
    return _Attempt(text, is_error=True, arguments=arguments, blocked=True)


def parse_arguments(raw: str) -> tuple[dict[str, Any] | None, str]:
    """The arguments as a dict, or ``None`` and what is wrong with them."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as error:
        return None, f"not valid JSON ({error.msg} at position {error.pos})"
    if not isinstance(value, dict):
        return None, f"expected a JSON object, got {type(value).__name__}"
    return value, ""


UNPARSED_SHOWN = 200
"""Characters of broken arguments quoted back to the model."""


def unparsed_result(tool_name: str, unparsed: str) -> str:
    """The error result of a call whose arguments were not JSON: it is never run
    (``docs/turn-loop.md`` §5); the model's text is quoted so it can see where it broke."""
    shown = unparsed if len(unparsed) <= UNPARSED_SHOWN else unparsed[:UNPARSED_SHOWN] + "…"
    logger.warning("tool call %s not run: its arguments are not JSON: %r", tool_name, unparsed)
    return (
        f"Invalid arguments for {tool_name}: not valid JSON (cut off?): {json.dumps(shown)}"
        f"{_json_problem(unparsed)}. The tool was not run; call the tool again with complete "
        "arguments."
    )


def _json_problem(text: str) -> str:
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        return f" ({error.msg} at position {error.pos})"
    return ""


def _request_id(decision: Decision) -> str | None:
    """The approval request id, when the gate reports it on the decision."""
    found = getattr(decision, "request_id", None)
    return found if isinstance(found, str) else None
