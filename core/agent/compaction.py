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
   summarises the range, the previous summary included. What it quotes of the range is
   sized from the room the window leaves beside the prompt and the summary's own output,
   in the session's learnt tokens; a summary call the server still finds too long teaches
   the meter its size and is made again quoting half as much, until it fits (or quotes
   only :data:`MIN_SOURCE_CHARS`). A summary cut off by its output limit
   (``finish_reason`` ``length``) is stored with :data:`SUMMARY_CUT_NOTE`, never as if
   whole. The user's ``redirect`` corrections in the range (``"User correction during the
   turn: …"``, recorded in the user message, :mod:`core.agent.steer`) are copied into the
   summary word for word after the model's text, so a correction survives however the
   model summarises.
3. **Stored, never deleted.** The summary is stored as one ``system`` row of the session;
   then the summarised rows (and the previous summary) are marked inactive
   (``Store.deactivate_messages``): they stay in the store, out of the history. The next
   requests send the summary (as a user message and a fixed acknowledgement,
   :func:`core.agent.context.as_sent`) and the remaining active messages.

An overflow error from the server (``context_too_long``: llama.cpp, OpenAI, Ollama and vLLM
wordings, :mod:`core.model.classify`) rescales the estimate by the size the server counted
(or, when it does not say, past the window), compacts the older turns when there are any,
fits the request again — its long texts cut to the room now known to be left — and retries
once, when something was summarised or cut; a second overflow, or nothing changed, ends
the turn with :func:`too_long_reply`, which says what can help. Before a call, a
compaction the turn has no model call left for is skipped (the request goes as it is);
after an overflow, :class:`SummaryRefused` ends the turn on its budget.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from core.agent.context import (
    BYTES_PER_TOKEN,
    ContextMeter,
    ContextUse,
    Fitted,
    cut_tool_result,
    fit_request,
    is_summary,
    raw_estimate,
    scaled,
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
SOURCE_MARGIN = 0.05
"""The share of the window a summarisation request leaves unused (estimates err)."""
MIN_SOURCE_CHARS = 200
"""A summarisation request quotes at least this much of its range."""

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
SUMMARY_CUT_NOTE = "[… the summary was cut off here: it reached its length limit.]"
_TOO_LONG = (
    "This request does not fit the model's context window, even with its long texts "
    "shortened{summarised}. Try a shorter message or ask for less output; if short messages "
    "fail too, the window is too small for the system prompt and tools (raise "
    "[model] context_window on the server and in the configuration)."
)


def too_long_reply(summarised: bool) -> str:
    """What the user reads when a request still overflowed after it was fitted again and
    retried: what is left is this turn's own part, so ``/new`` is not suggested."""
    said = " and the older messages summarised" if summarised else ""
    return _TOO_LONG.format(summarised=said)


TOO_LONG_REPLY = too_long_reply(False)
"""The words when nothing could be summarised."""


SummaryCall = Callable[[ModelRequest], Awaitable[ModelReply]]
"""Sends one summarisation request and returns the reply (or raises ``ModelError``,
``Cancelled``, :class:`SummaryRefused`); the caller's hooks, retries and budget apply."""


class SummaryRefused(Exception):
    """The turn has no model call left for a summary (``max_iterations`` or the shared
    budget reached, ``docs/turn-loop.md`` §4): no compaction is made."""


class ContextOverflow(Exception):
    """The server still found the request too long after it was fitted again (and the
    older turns compacted, when there were any): the turn ends with :attr:`reply`."""

    def __init__(self, error: ModelError, summarised: bool = False) -> None:
        super().__init__(str(error))
        self.error = error
        self.summarised = summarised

    @property
    def reply(self) -> str:
        return too_long_reply(self.summarised)


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
    threshold: int = field(init=False)
    """The request size that makes a turn compact first (``window`` × ``compact_at``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "threshold", int(self.window * self.compact_at))


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
        ratio = self.meter.ratio(session_id)
        cut = choose_cut(entries, keep_from, self.limits.window, ratio)
        head = entries[:cut]
        if not any(not is_summary(e.message) for e in head):
            return None
        text = await self._summarise(session_id, [e.message for e in head], call)
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

    async def _summarise(
        self, session_id: str, messages: Sequence[ChatMessage], call: SummaryCall
    ) -> str:
        """The model's summary of ``messages``, quoting what fits (halved on overflow)."""
        window, rendered = self.limits.window, render(messages)
        limit = self._source_limit(session_id, rendered)
        while True:
            request = summary_request(cut_tool_result(rendered, limit, "conversation"), window)
            try:
                reply = await call(request)
            except ModelError as error:
                if error.kind != "context_too_long" or limit <= MIN_SOURCE_CHARS:
                    raise
                counted = error.classification.prompt_tokens
                self.meter.overflowed(session_id, raw_estimate(request.messages), window, counted)
                limit = max(min(limit, len(rendered)) // 2, MIN_SOURCE_CHARS)
                logger.info("the summary call was too long: it quotes %d characters now", limit)
                continue
            return summary_text(reply, request, window)

    def _source_limit(self, session_id: str, rendered: str) -> int:
        """The characters of ``rendered`` a summarisation request can quote: the room the
        window leaves beside the prompt and the summary's output, in learnt tokens."""
        window, ratio = self.limits.window, self.meter.ratio(session_id)
        bare = scaled(raw_estimate(summary_request("", window).messages), ratio)
        room = window * (1 - SUMMARY_SHARE - SOURCE_MARGIN) - bare
        wire = len(json.dumps(rendered, ensure_ascii=False).encode()) / max(len(rendered), 1)
        return max(int(room * BYTES_PER_TOKEN / ratio / wire), MIN_SOURCE_CHARS)

    async def session_use(
        self, session_id: str, system_prompt: str, tools: Sequence[ToolSpec]
    ) -> ContextUse:
        """The estimate of the session's next request (``/status``)."""
        history = summary_first(await self.store.load_active_messages(session_id))
        transcript = Transcript(system_prompt, history)
        ratio = self.meter.ratio(session_id)
        fitted = fit_request(transcript.for_model(), self.limits.window, ratio, tools)
        return ContextUse(fitted.tokens, self.limits.window)


def summary_request(source: str, window: int) -> ModelRequest:
    """The summarisation request quoting ``source``, its output capped at
    :data:`SUMMARY_SHARE` of the window."""
    return ModelRequest(
        messages=[
            ChatMessage(role="system", content=SUMMARY_PROMPT),
            ChatMessage(role="user", content=source),
        ],
        extra={"max_tokens": max(int(window * SUMMARY_SHARE), 16)},
    )


def summary_text(reply: ModelReply, request: ModelRequest, window: int) -> str:
    """What is stored of the summary call's ``reply``: its text (with a note when its
    length limit cut it off), or, when it said nothing, what it was asked to summarise."""
    said = (reply.content or "").strip()
    limit = int(window * SUMMARY_SHARE) * BYTES_PER_TOKEN
    if not said:
        return cut_tool_result(request.messages[1].text(), limit, "conversation")
    if reply.finish_reason == "length":
        said = f"{said}\n\n{SUMMARY_CUT_NOTE}"
    return cut_tool_result(said, limit, "summary")


def choose_cut(entries: Sequence[Entry], keep_from: int, window: int, ratio: float = 1.0) -> int:
    """Where the summarised range ends: at the start of a turn, keeping up to
    :data:`KEEP_RECENT_TURNS` turns before ``keep_from`` whole while they fit in
    :data:`KEPT_SHARE` of ``window`` (in the session's learnt tokens, ``ratio``);
    ``keep_from`` itself when none fits."""
    starts = [i for i in range(keep_from) if _starts_turn(entries[i])]
    budget = window * KEPT_SHARE
    for cut in starts:
        kept = [s for s in starts if s >= cut]
        recent = [e.message for e in entries[cut:keep_from]]
        if len(kept) <= KEEP_RECENT_TURNS and scaled(raw_estimate(recent), ratio) <= budget:
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


def _estimated(build: Callable[[list[ChatMessage]], ModelRequest], fitted: Fitted) -> ModelRequest:
    """The request of ``fitted``, carrying its estimate and wire form
    (:attr:`ModelRequest.estimated`, :attr:`ModelRequest.wire`)."""
    return replace(build(fitted.messages), estimated=fitted.raw, wire=fitted.wire)


class ContextKeeper:
    """One turn's side of context management: before each model call the request is
    fitted (long texts cut to the room left, compaction past the threshold); an overflow
    error rescales the estimate, fits again and retries once; the reply's usage corrects
    the estimate."""

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
        self._summarised = False
        """This call compacted the history (for the words of :class:`ContextOverflow`)."""

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
        self._summarised = False
        fitted = await self._fitted(compactor)
        request = _estimated(build, fitted)
        try:
            reply = await send(request)
        except ModelError as error:
            if error.kind != "context_too_long":
                raise
            self._rescale(compactor, fitted.raw, error)
            refused = fitted.raw
            fitted = await self._after_overflow(compactor, error)
            request = _estimated(build, fitted)
            if not self._summarised and fitted.raw >= refused:
                raise ContextOverflow(error) from error  # nothing summarised, nothing cut
            try:
                reply = await send(request)
            except ModelError as again:
                if again.kind == "context_too_long":
                    self._rescale(compactor, fitted.raw, again)
                    raise ContextOverflow(again, self._summarised) from again
                raise
        compactor.meter.observe(self._scope.session_id, fitted.raw, reply.usage.prompt_tokens)
        return reply

    def _rescale(self, compactor: Compactor, raw: int, error: ModelError) -> None:
        """Learn the refused request's size (estimated ``raw``) from the server (or at least
        past the window)."""
        counted = error.classification.prompt_tokens
        window = compactor.limits.window
        compactor.meter.overflowed(self._scope.session_id, raw, window, counted)

    def _messages(self, compactor: Compactor) -> Fitted:
        ratio = compactor.meter.ratio(self._scope.session_id)
        window = compactor.limits.window
        return fit_request(self._transcript.for_model(), window, ratio, self._tools)

    async def _fitted(self, compactor: Compactor) -> Fitted:
        fitted = self._messages(compactor)
        tokens = fitted.tokens
        if tokens <= compactor.limits.threshold:
            return fitted
        logger.info(
            "turn %s: next request ~%d tokens of %d: compacting",
            self._scope.turn_id,
            tokens,
            compactor.limits.window,
        )
        try:
            if await self._compact(compactor) is None:
                return fitted
        except SummaryRefused:
            logger.info("turn %s: no model call left for a summary", self._scope.turn_id)
            return fitted
        return self._messages(compactor)

    async def _after_overflow(self, compactor: Compactor, error: ModelError) -> Fitted:
        logger.warning(
            "turn %s: the model found the request too long: %s", self._scope.turn_id, error
        )
        await self._compact(compactor)
        return self._messages(compactor)

    async def _compact(self, compactor: Compactor) -> Compacted | None:
        scope = self._scope
        try:
            done = await compactor.compact(
                scope.session_id, scope.turn_id, self._transcript, self._summarise
            )
            self._summarised = self._summarised or done is not None
            return done
        except ModelError as error:
            logger.warning("turn %s: the summary call failed: %s", scope.turn_id, error)
            return None
