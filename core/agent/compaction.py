"""Compaction: older turns summarised into one stored message (``docs/turn-loop.md`` §17).

When a session's next request would pass ``compact_at`` of the model's context window
(:class:`core.agent.context.ContextMeter` estimates it), or the server answered that the
request is too long, the older turns are **compacted**:

1. **The cut.** Everything before the start of a turn (a stored user message) is
   summarised; the current turn and up to :data:`KEEP_RECENT_TURNS` turns before it stay
   whole, as long as those recent turns fit in :data:`KEPT_SHARE` of the window. A cut only
   falls at a turn's start, so an assistant tool call and its results are never split (a
   strict server rejects a tool result without its call).
2. **The summary.** One model call (:data:`SUMMARY_PROMPT`, no tools, not streamed, its
   output capped at :data:`SUMMARY_SHARE` of the window) summarises the range; it is sent
   by the caller's :data:`SummaryCall` — in a turn and for ``/compact`` the turn's model
   caller (:class:`core.agent.model_call.ModelCaller`: ``pre_api_request``/
   ``post_api_request`` and the error hooks, retries, the slow notice, a ``model.call``
   span, under a token ``/stop`` cancels), in a turn counted like any model call
   (:class:`SummaryRefused` when the turn has none left, ``docs/turn-loop.md`` §4). It
   summarises the range, the previous summary included. The user's
   ``redirect`` corrections in the range (``"User correction during the turn: …"``,
   recorded in the user message, :mod:`core.agent.steer`) are copied into the summary word
   for word after the model's text, so a correction survives however the model summarises.
3. **Stored, never deleted.** The summary is stored as one ``system`` row of the session;
   then the summarised rows (and the previous summary) are marked inactive
   (``Store.deactivate_messages``): they stay in the store, out of the history. The next
   requests send the summary (as a user message and a fixed acknowledgement,
   :func:`core.agent.context.as_sent`) and the remaining active messages.

An overflow error from the server (``context_too_long``: llama.cpp, OpenAI, Ollama and vLLM
wordings, :mod:`core.model.classify`) compacts once and retries once; a second overflow, or
nothing left to compact, ends the turn with :data:`TOO_LONG_REPLY`. Before a call, a
compaction the turn has no model call left for is skipped (the request goes as it is);
after an overflow, :class:`SummaryRefused` ends the turn on its budget.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from core.agent.context import (
    ContextMeter,
    ContextUse,
    cut_tool_result,
    fit_tool_results,
    is_summary,
    raw_estimate,
    summary_first,
)
from core.agent.scope import TurnScope
from core.agent.steer import CORRECTION_PREFIX
from core.agent.transcript import Entry, Transcript
from core.model.base import ModelClient, ModelRequest
from core.model.errors import ModelError
from core.model.retry import RetryPolicy
from core.store.base import Store
from core.types import ChatMessage, ModelReply, ToolSpec

logger = logging.getLogger(__name__)

KEEP_RECENT_TURNS = 2
"""Turns before the current one kept whole by a compaction (while they fit)."""
KEPT_SHARE = 0.5
"""The recent turns kept whole may fill at most this share of the window."""
SUMMARY_SHARE = 0.25
"""The summary's ``max_tokens``: this share of the window."""
SOURCE_SHARE = 0.5
"""What the summarisation request may quote of the range: this share of the window."""

SUMMARY_PROMPT = (
    "You compress the earlier part of a conversation between a user and an AI assistant "
    "that uses tools, so that the assistant can continue the conversation without the "
    "original messages. Write a concise summary in the conversation's language. Keep: what "
    "the user asked for and still wants, decisions made, facts learnt (names, paths, "
    "numbers, commands and their results), what the tools did and what came of it, and "
    "what remains to do. Keep every correction the user made word for word. Write only "
    "the summary, no preamble."
)
SUMMARY_HEADER = (
    "[Summary of the earlier conversation: {count} messages were summarised to fit the "
    "model's context window.]"
)
CORRECTIONS_HEADER = "Corrections the user made, word for word:"
TOO_LONG_REPLY = (
    "The conversation is too long for the model even after summarising; send /new to start over."
)


SummaryCall = Callable[[ModelRequest], Awaitable[ModelReply]]
"""Sends one summarisation request and returns the reply (or raises ``ModelError``,
``Cancelled``, :class:`SummaryRefused`); the caller's hooks, retries and budget apply."""


class SummaryRefused(Exception):
    """The turn has no model call left for a summary (``max_iterations`` or the shared
    budget reached, ``docs/turn-loop.md`` §4): no compaction is made."""


class ContextOverflow(Exception):
    """The server still found the request too long after a compaction (or none was
    possible): the turn ends with :data:`TOO_LONG_REPLY`."""

    def __init__(self, error: ModelError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True, slots=True)
class Compacted:
    """What one compaction did: ``summarised`` rows made inactive, the summary's row id."""

    summarised: int
    summary_id: int


@dataclass(frozen=True, slots=True)
class ContextLimits:
    """A model preset's window and when to compact (``[model] context_window``,
    ``compact_at``)."""

    window: int
    compact_at: float

    @property
    def threshold(self) -> int:
        return int(self.window * self.compact_at)


class Compactor:
    """Compacts a session's history; one per agent (its meter is per session)."""

    def __init__(
        self,
        store: Store,
        model: ModelClient,
        policy: RetryPolicy,
        limits: ContextLimits,
        meter: ContextMeter | None = None,
    ) -> None:
        self.store, self.model, self.policy, self.limits = store, model, policy, limits
        self.meter = meter or ContextMeter()

    async def compact(
        self,
        session_id: str,
        turn_id: str | None,
        transcript: Transcript,
        call: SummaryCall,
    ) -> Compacted | None:
        """Summarise the transcript's older turns, the summary sent by ``call`` (see the
        module docstring); None when there is nothing to summarise. A failed summary call
        raises what ``call`` raised."""
        entries, keep_from = transcript.entries, transcript.turn_start
        cut = choose_cut(entries, keep_from, self.limits.window)
        head = entries[:cut]
        if not any(not is_summary(e.message) for e in head):
            return None
        text = await self._summarise([e.message for e in head], call)
        stored = [e.stored_id for e in head if e.stored_id is not None]
        summary = ChatMessage(role="system", content=compose_summary(text, head))
        summary_id = await self.store.append_message(session_id, turn_id, summary)
        await self.store.deactivate_messages(stored)
        transcript.replace_head(cut, Entry(summary, summary_id, turn_id))
        logger.info(
            "session %s compacted: %d messages summarised into message %d",
            session_id,
            len(stored),
            summary_id,
        )
        return Compacted(len(stored), summary_id)

    async def _summarise(self, messages: Sequence[ChatMessage], call: SummaryCall) -> str:
        window = self.limits.window
        source = cut_tool_result(render(messages), int(window * SOURCE_SHARE) * 4, "conversation")
        request = ModelRequest(
            messages=[
                ChatMessage(role="system", content=SUMMARY_PROMPT),
                ChatMessage(role="user", content=source),
            ],
            extra={"max_tokens": max(int(window * SUMMARY_SHARE), 16)},
        )
        reply = await call(request)
        said = (reply.content or "").strip()
        limit = int(window * SUMMARY_SHARE) * 4
        return (
            cut_tool_result(said, limit, "summary")
            if said
            else cut_tool_result(source, limit, "conversation")
        )

    async def session_use(
        self, session_id: str, system_prompt: str, tools: Sequence[ToolSpec]
    ) -> ContextUse:
        """The estimate of the session's next request (``/status``)."""
        history = summary_first(await self.store.load_active_messages(session_id))
        transcript = Transcript(system_prompt, history)
        messages = fit_tool_results(transcript.for_model(), self.limits.window)
        tokens = self.meter.estimate(session_id, messages, tools)
        return ContextUse(tokens, self.limits.window)


def choose_cut(entries: Sequence[Entry], keep_from: int, window: int) -> int:
    """Where the summarised range ends: at the start of a turn, keeping up to
    :data:`KEEP_RECENT_TURNS` turns before ``keep_from`` whole while they fit in
    :data:`KEPT_SHARE` of ``window``; ``keep_from`` itself when none fits."""
    starts = [i for i in range(keep_from) if _starts_turn(entries[i])]
    budget = window * KEPT_SHARE
    for cut in starts:
        kept = [s for s in starts if s >= cut]
        recent = [e.message for e in entries[cut:keep_from]]
        if len(kept) <= KEEP_RECENT_TURNS and raw_estimate(recent) <= budget:
            return cut
    return keep_from


def _starts_turn(entry: Entry) -> bool:
    return entry.message.role == "user" and entry.stored_id is not None


def render(messages: Sequence[ChatMessage]) -> str:
    """The range as plain text for the summarisation request."""
    lines: list[str] = []
    for message in messages:
        text = message.text().strip()
        if is_summary(message):
            lines.append(f"Summary of what came before:\n{text}")
        elif message.role == "assistant":
            if text:
                lines.append(f"Assistant: {text}")
            lines += [f"Assistant called {c.name}({c.arguments})" for c in message.tool_calls]
        elif message.role == "tool":
            lines.append(f"Result of {message.name or 'a tool'}: {text}")
        else:
            lines.append(f"User: {text}")
    return "\n\n".join(lines)


def compose_summary(text: str, head: Sequence[Entry]) -> str:
    """The stored summary: a header, the model's text, the user's corrections verbatim."""
    parts = [SUMMARY_HEADER.format(count=len(head)), text]
    found = corrections(e.message for e in head)
    if found:
        parts.append("\n".join([CORRECTIONS_HEADER, *found]))
    return "\n\n".join(parts)


def corrections(messages: Iterable[ChatMessage]) -> list[str]:
    """Every ``redirect`` correction line of ``messages`` (earlier summaries included), in
    order, each once."""
    found: list[str] = []
    for message in messages:
        for line in message.text().splitlines():
            if line.startswith(CORRECTION_PREFIX) and line not in found:
                found.append(line)
    return found


class ContextKeeper:
    """One turn's side of context management: before each model call the request is
    fitted (oversized tool results cut, compaction past the threshold); an overflow error
    compacts once and retries once; the reply's usage corrects the estimate."""

    def __init__(
        self,
        compactor: Compactor | None,
        scope: TurnScope,
        transcript: Transcript,
        summarise: SummaryCall,
        tools: Sequence[ToolSpec],
    ) -> None:
        """``summarise`` sends the summary requests (the turn's caller, counted)."""
        self._compactor, self._scope, self._transcript = compactor, scope, transcript
        self._summarise, self._tools = summarise, tools

    async def call(
        self,
        build: Callable[[list[ChatMessage]], ModelRequest],
        send: Callable[[ModelRequest], Awaitable[ModelReply]],
    ) -> ModelReply:
        """``send(build(messages))`` with the context managed; raises
        :class:`ContextOverflow` when the request cannot be made to fit."""
        compactor = self._compactor
        if compactor is None:
            return await send(build(self._transcript.for_model()))
        request = build(await self._fitted(compactor))
        try:
            reply = await send(request)
        except ModelError as error:
            if error.kind != "context_too_long":
                raise
            request = build(await self._after_overflow(compactor, error))
            try:
                reply = await send(request)
            except ModelError as again:
                if again.kind == "context_too_long":
                    raise ContextOverflow(again) from again
                raise
        raw = raw_estimate(request.messages, request.tools)
        compactor.meter.observe(self._scope.session_id, raw, reply.usage.prompt_tokens)
        return reply

    def _messages(self, compactor: Compactor) -> list[ChatMessage]:
        return fit_tool_results(self._transcript.for_model(), compactor.limits.window)

    async def _fitted(self, compactor: Compactor) -> list[ChatMessage]:
        messages = self._messages(compactor)
        tokens = compactor.meter.estimate(self._scope.session_id, messages, self._tools)
        if tokens <= compactor.limits.threshold:
            return messages
        logger.info(
            "turn %s: next request ~%d tokens of %d: compacting",
            self._scope.turn_id,
            tokens,
            compactor.limits.window,
        )
        try:
            if await self._compact(compactor) is None:
                return messages
        except SummaryRefused:
            logger.info("turn %s: no model call left for a summary", self._scope.turn_id)
            return messages
        return self._messages(compactor)

    async def _after_overflow(self, compactor: Compactor, error: ModelError) -> list[ChatMessage]:
        logger.warning(
            "turn %s: the model found the request too long: %s", self._scope.turn_id, error
        )
        if await self._compact(compactor) is None:
            raise ContextOverflow(error) from error
        return self._messages(compactor)

    async def _compact(self, compactor: Compactor) -> Compacted | None:
        scope = self._scope
        try:
            return await compactor.compact(
                scope.session_id, scope.turn_id, self._transcript, self._summarise
            )
        except ModelError as error:
            logger.warning("turn %s: the summary call failed: %s", scope.turn_id, error)
            return None
