"""The external-runtime bypass (``docs/turn-loop.md`` §14): a subprocess runs the whole turn.

When a profile sets ``external_runtime = ["cmd", "arg", ...]`` the engine's own loop is
skipped. The gateway side stays: the session lock, history, the stored user message,
``on_session_start`` / ``pre_llm_call`` / ``on_session_end``, the stored reply, then
``transform_llm_output`` and ``post_llm_call`` on it — under the turn's token, as in the
engine's own loop, so ``/stop`` during one ends the turn ``interrupted`` at once — and the
turn with its exit reason (``docs/turn-loop.md`` §14). The step callback on ``progress``
lines runs under the token too.

Protocol — JSON lines (one UTF-8 JSON object per line), one process per turn, started in
the session's workspace (:meth:`AgentProfile.session_workspace`, created if missing — the
directory the system prompt names):

**stdin** (engine → runtime): exactly one line, then stdin is closed::

    {"type": "turn", "session_key": "...", "session_id": "...", "turn_id": "...",
     "messages": [<Chat Completions messages, system prompt first; the last one is the
                   user message, with any pre_llm_call context in front of it>]}

**stdout** (runtime → engine), any number of lines, in order:

* ``{"type": "tool", "id": "...", "name": "...", "arguments": "<json text>",
  "result": "...", "is_error": false}`` — a tool the runtime ran; stored as a tool call
  of the turn and reported to the next step callback;
* ``{"type": "progress", "text": "..."}`` — the runtime starts its next step: the step
  callback gets ``(step number, [{name, result, arguments}] of the tools since the last
  progress line)``;
* ``{"type": "reply", "text": "..."}`` — the final answer; the turn completes (exit
  reason ``external_runtime``) and the engine stops reading;
* ``{"type": "error", "message": "..."}`` — the runtime gave up; the turn fails.

Lines that are not JSON objects of a known type are logged and skipped; stderr is kept
for the error message. A process that exits without a ``reply`` fails the turn with its
exit code and the end of its stderr. Cancelling the turn kills the process at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.agent.control import TurnControl
from core.agent.profile import AgentProfile
from core.agent.scope import TurnScope
from core.agent.step import notify_step
from core.agent.transcript import Transcript, replace_reply_text, store_reply
from core.agent.turn import StepCallback
from core.agent.turn_run import TurnEnd, stop_end
from core.cancellation import CancellationToken, Cancelled
from core.hooks.registry import HookRegistry
from core.store.base import Store, ToolCallRecord
from core.types import ChatMessage

logger = logging.getLogger(__name__)

LINE_LIMIT = 16 * 1024 * 1024
STDERR_TAIL = 500


@dataclass(slots=True)
class _Progress:
    steps: int = 0
    tools: list[dict[str, Any]] = field(default_factory=list)
    reply: str | None = None
    error: str | None = None

    @property
    def settled(self) -> bool:
        return self.reply is not None or self.error is not None


class ExternalRuntime:
    """Runs one turn in a subprocess; make one per turn."""

    def __init__(
        self,
        command: Sequence[str],
        store: Store,
        hooks: HookRegistry,
        profile: AgentProfile,
        clock: Callable[[], float],
    ) -> None:
        self._command = list(command)
        self._store = store
        self._hooks = hooks
        self._profile = profile
        self._clock = clock
        self._scope: TurnScope | None = None
        self._step_callback: StepCallback | None = None
        self._token: CancellationToken | None = None
        self.progress = _Progress()

    async def run(
        self,
        scope: TurnScope,
        transcript: Transcript,
        control: TurnControl,
        step_callback: StepCallback | None,
    ) -> TurnEnd:
        self._scope, self._step_callback, self._token = scope, step_callback, control.token
        try:
            await control.token.guard(self._converse(transcript))
            return await self._conclude(scope, transcript)
        except Cancelled as stopped:  # during the conversation or an after-reply hook
            return _with_steps(stop_end(stopped.reason), self.progress.steps)
        except OSError as error:
            return TurnEnd("failed", "external_runtime", error=f"cannot start runtime: {error}")

    async def _converse(self, transcript: Transcript) -> None:
        assert self._scope is not None
        workspaces = self._profile.workspaces()
        cwd = await asyncio.to_thread(workspaces.ensure, self._scope.session_key)
        process = await asyncio.create_subprocess_exec(
            *self._command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            limit=LINE_LIMIT,
        )
        assert process.stdin and process.stdout and process.stderr
        stderr = asyncio.ensure_future(process.stderr.read())
        try:
            await self._send(process.stdin, transcript)
            await self._read(process.stdout)
            if not self.progress.settled:
                await self._exited(process, await stderr)
        finally:
            await _reap(process, stderr)

    async def _send(self, stdin: asyncio.StreamWriter, transcript: Transcript) -> None:
        assert self._scope is not None
        line = {
            "type": "turn",
            **self._scope.common,
            "messages": [m.to_wire() for m in transcript.for_model()],
        }
        stdin.write((json.dumps(line) + "\n").encode())
        with contextlib.suppress(ConnectionError):
            await stdin.drain()
        stdin.close()

    async def _exited(self, process: asyncio.subprocess.Process, stderr: bytes) -> None:
        code = await process.wait()
        tail = stderr.decode(errors="replace")[-STDERR_TAIL:].strip()
        self.progress.error = f"runtime exited with code {code} without a reply: {tail}"

    async def _read(self, stdout: asyncio.StreamReader) -> None:
        async for raw in stdout:
            event = _parse(raw)
            if event is not None:
                await self._on_event(event)
            if self.progress.settled:
                return

    async def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "reply":
            self.progress.reply = str(event.get("text", ""))
        elif kind == "error":
            self.progress.error = str(event.get("message", "external runtime error"))
        elif kind == "tool":
            await self._on_tool(event)
        elif kind == "progress":
            self.progress.steps += 1
            tools, self.progress.tools = self.progress.tools, []
            await notify_step(self._step_callback, self.progress.steps, tools, self._token)
        else:
            logger.warning("external runtime: unknown event type %r skipped", kind)

    async def _on_tool(self, event: dict[str, Any]) -> None:
        assert self._scope is not None
        now = self._clock()
        record = ToolCallRecord(
            call_id=str(event.get("id") or uuid.uuid4().hex),
            turn_id=self._scope.turn_id,
            session_id=self._scope.session_id,
            name=str(event.get("name", "?")),
            arguments=str(event.get("arguments", "{}")),
            result=str(event.get("result", "")),
            is_error=bool(event.get("is_error", False)),
            started_at=now,
            finished_at=now,
        )
        await self._store.record_tool_call(record)
        self.progress.tools.append(
            {"name": record.name, "result": record.result, "arguments": record.arguments}
        )

    async def _conclude(self, scope: TurnScope, transcript: Transcript) -> TurnEnd:
        """The reply stored as the runtime sent it, then its after-reply hooks under the
        turn's token, as in the engine's own loop (``docs/turn-loop.md`` §3, §14): a stop
        while one runs raises ``Cancelled`` and the turn ends ``interrupted``."""
        steps = self.progress.steps
        if self.progress.reply is None:
            error = self.progress.error or "external runtime gave no reply"
            reply = f"The external agent runtime failed: {error}"
            return TurnEnd("failed", "external_runtime", reply, error, True, steps)
        assert self._token is not None
        raw, hook_args, guard = self.progress.reply, scope.common, self._token.guard
        message = ChatMessage(role="assistant", content=raw)
        entry = await store_reply(self._store, scope, transcript, message)
        text = await guard(self._hooks.transform("transform_llm_output", raw, **hook_args))
        if text != raw:
            await replace_reply_text(self._store, scope, transcript, entry, text)
        await guard(self._hooks.notify("post_llm_call", **hook_args, reply=text))
        return TurnEnd("completed", "external_runtime", text, iterations=steps)


def _with_steps(end: TurnEnd, steps: int) -> TurnEnd:
    return TurnEnd(end.status, end.exit_reason, end.reply, end.error, end.stopped_early, steps)


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        event = json.loads(raw)
    except ValueError:
        logger.warning("external runtime: non-JSON line skipped: %.200r", raw)
        return None
    if not isinstance(event, dict):
        logger.warning("external runtime: non-object line skipped: %.200r", raw)
        return None
    return event


async def _reap(process: asyncio.subprocess.Process, stderr: asyncio.Future[bytes]) -> None:
    """Make sure the process is gone (killed if still running) and stderr drained."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    await process.wait()
    with contextlib.suppress(Exception):
        await stderr
