"""How full a session's context is, and what a request may hold (``docs/turn-loop.md`` §17).

The model's context window is counted in tokens, and only the server can count them. Before
each call the engine makes a cheap estimate instead: the UTF-8 bytes of the request's
messages and tool specs, serialised as they are sent, divided by :data:`BYTES_PER_TOKEN`.
The server's own counts correct it: :class:`ContextMeter` keeps, per session, the ratio of
the tokens the server counted to the raw estimate of the same request, and scales later
estimates by it. The counts come from each reply's ``usage.prompt_tokens`` and from an
overflow error that names the request's size (llama.cpp's ``n_prompt_tokens``, OpenAI's
"your messages resulted in N tokens"). A session with nothing learnt yet starts from the
latest ratio any session of this model learnt: dense text (``ls -la`` output, logs) is about
2 characters a token for a small local model's tokenizer, twice what bytes / 4 assumes.

Two more things live here because every request goes through them:

* every request is fitted to the room the window leaves (:func:`fit_request`): a single
  tool result, message or answer larger than :data:`TOOL_RESULT_SHARE` of the window is cut,
  head and tail kept, with a note saying how much was left out (:func:`cut_tool_result`);
  when the request is still larger than the window less :data:`REPLY_SHARE` (room for the
  answer), its largest texts are cut further until it fits. The stored messages stay whole;
  for the same messages and the same learnt ratio the same cut is made on every request
  (byte-identical, so a prompt cache keeps working);
* the stored compaction summary (a ``system`` row of the history, see
  :mod:`core.agent.compaction`) goes first in the history (:func:`summary_first`) and is
  sent as a user message and a fixed acknowledgement (:func:`as_sent`), so no second system
  message reaches a strict chat template and the roles still alternate.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from core.bounded import BoundedMap
from core.store.base import StoredMessage
from core.types import ChatMessage, ToolSpec

DEFAULT_CONTEXT_WINDOW = 32768
"""``[model] context_window`` when the configuration does not say (tokens)."""
DEFAULT_COMPACT_AT = 0.8
"""``[model] compact_at``: compact when the next request would pass this share."""
BYTES_PER_TOKEN = 4
TOOL_RESULT_SHARE = 0.4
"""A single tool result (or message) may fill at most this share of the window."""
REPLY_SHARE = 0.1
"""The share of the window a fitted request leaves for the answer."""
MIN_KEPT_CHARS = 400
"""A text is never cut below this many characters (its head and tail stay readable)."""
FIT_PASSES = 6
"""How many times :func:`fit_request` cuts further before it gives up (then the server
decides, and an overflow rescales and retries)."""
MIN_RATIO, MAX_RATIO = 0.25, 4.0
"""Bounds of the learnt tokens-per-estimate ratio (a broken ``usage`` cannot run away)."""
REMEMBERED_SESSIONS = 10_000
IMAGE_TOKENS = 1_000
"""What one image part is counted as in the estimate (a high-detail 1024x1024 image is
about 765 tokens at OpenAI; the reported usage corrects the rest)."""

SUMMARY_ACK = "Understood. I will continue the conversation from this summary."
"""The assistant's fixed answer to the summary, sent after it (never stored)."""


def raw_estimate(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()) -> int:
    """Tokens of a request by bytes: the wire JSON of its messages and tools / 4, each
    image part counted as :data:`IMAGE_TOKENS` (its ``data:`` URL is not text the model
    reads)."""
    return _raw([m.to_wire() for m in messages], [t.wire for t in tools])


def _raw(wire: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    """:func:`raw_estimate` of messages and tools already in their wire form (made once
    per fitted request, however many passes it takes, and sent as they are: ``wire`` is
    not changed)."""
    counted: list[dict[str, Any]] = []
    images = 0
    for sent in wire:
        content = sent["content"]
        if isinstance(content, list):  # image parts count as IMAGE_TOKENS, not their URL
            kept = [p for p in content if p.get("type") != "image_url"]
            images += len(content) - len(kept)
            sent = {**sent, "content": kept}
        counted.append(sent)
    size = len(json.dumps(counted + tools, ensure_ascii=False).encode())
    return math.ceil(size / BYTES_PER_TOKEN) + IMAGE_TOKENS * images


@dataclass(frozen=True, slots=True)
class ContextUse:
    """An estimate of a session's next request against the model's window."""

    tokens: int
    window: int

    @property
    def share(self) -> float:
        return self.tokens / self.window

    def describe(self) -> str:
        """What ``/status`` shows: ``context: 41% of 32768 tokens (est.)``."""
        return f"context: {round(self.share * 100)}% of {self.window} tokens (est.)"


class ContextMeter:
    """Estimates corrected by what the server counted, per session (in memory); one per
    agent, so per model: a new session starts from the model's latest ratio."""

    def __init__(self) -> None:
        self._ratios: BoundedMap[str, float] = BoundedMap(REMEMBERED_SESSIONS)
        self._latest = 1.0
        """The ratio the model's server reported last, for a session with none yet."""

    def ratio(self, session_id: str) -> float:
        """Server tokens per raw-estimate token for this session."""
        return self._ratios.get(session_id, self._latest)

    def estimate(
        self, session_id: str, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> int:
        """The request's tokens: the raw estimate scaled by the session's learnt ratio."""
        return scaled(raw_estimate(messages, tools), self.ratio(session_id))

    def observe(self, session_id: str, raw: int, reported: int) -> None:
        """The server counted ``reported`` prompt tokens for a request estimated ``raw``
        (a reply's usage, an overflow's count)."""
        if raw <= 0 or reported <= 0:
            return  # no usage reported: keep what was learnt
        ratio = min(MAX_RATIO, max(MIN_RATIO, reported / raw))
        self._ratios.put(session_id, ratio)
        self._latest = ratio

    def overflowed(self, session_id: str, raw: int, window: int, counted: int | None) -> None:
        """The server refused a request estimated ``raw`` as longer than ``window``: learn
        its ``counted`` size, or (not said) at least a tenth more than was estimated and
        more than the window."""
        floor = max(window + 1, math.ceil(scaled(raw, self.ratio(session_id)) * 1.1))
        self.observe(session_id, raw, counted if counted and counted > window else floor)


def scaled(raw: int, ratio: float) -> int:
    return math.ceil(raw * ratio)


def tool_result_limit(window: int, ratio: float = 1.0) -> int:
    """The most characters one tool result may send (a share of the window, in the
    session's learnt tokens)."""
    return int(window * TOOL_RESULT_SHARE * BYTES_PER_TOKEN / ratio)


def cut_tool_result(text: str, limit: int, what: str = "tool result") -> str:
    """``text`` if it fits in ``limit`` characters, else its head and tail with a note
    naming ``what`` was cut."""
    if len(text) <= limit:
        return text
    keep = max(limit - 200, 2)  # room for the note
    head, tail = text[: keep * 2 // 3], text[-(keep - keep * 2 // 3) :]
    cut = len(text) - len(head) - len(tail)
    note = (
        f"\n\n[… {cut} characters cut from the middle of this {what}: it was too large "
        f"for the model's context window ({len(text)} characters in all) …]\n\n"
    )
    return head + note + tail


def fit_tool_results(
    messages: Iterable[ChatMessage], window: int, ratio: float = 1.0
) -> list[ChatMessage]:
    """The messages with every oversized text cut to a share of the window
    (:func:`cut_tool_result`); the system prompt is never cut."""
    limit = tool_result_limit(window, ratio)
    fitted: list[ChatMessage] = []
    for index, message in enumerate(messages):
        content = message.content  # only a text (never list content) is cut
        if isinstance(content, str) and len(content) > limit and _cuttable(message, index):
            message = _cut(message, limit)
        fitted.append(message)
    return fitted


@dataclass(frozen=True, slots=True)
class Fitted:
    """A request's messages fitted to the window, and their :func:`raw_estimate` (with the
    tools): made once per model call, read by the threshold check, the ratio learnt from
    the reply and the usage estimated when the server gives none."""

    messages: list[ChatMessage]
    raw: int
    tokens: int
    """``raw`` scaled by the session's learnt ratio: what the threshold is checked against."""
    wire: list[dict[str, Any]]
    """:attr:`messages` in their wire form, made once for the estimate and sent as they
    are (:attr:`core.model.base.ModelRequest.wire`)."""


def fit_request(
    messages: Iterable[ChatMessage],
    window: int,
    ratio: float = 1.0,
    tools: Sequence[ToolSpec] = (),
) -> Fitted:
    """The request's messages fitted to the room the window leaves (the module docstring):
    oversized texts cut to a share of the window, then the largest ones cut further until
    the estimate (scaled by ``ratio``) leaves :data:`REPLY_SHARE` of the window free."""
    originals = list(messages)
    fitted = fit_tool_results(originals, window, ratio)
    target = int(window * (1 - REPLY_SHARE))
    wire_tools = [t.wire for t in tools]
    wire = [m.to_wire() for m in fitted]
    raw = _raw(wire, wire_tools)
    for _ in range(FIT_PASSES):
        excess = math.ceil(raw * ratio) - target
        if excess <= 0:
            break
        largest = _largest_cuttable(fitted)
        if largest is None:
            break
        text = fitted[largest].text()
        wire_per_char = len(json.dumps(text, ensure_ascii=False).encode()) / len(text)
        drop = math.ceil(excess * BYTES_PER_TOKEN / ratio / wire_per_char) + _NOTE_CHARS
        limit = max(MIN_KEPT_CHARS, len(text) - drop)
        fitted[largest] = _cut(originals[largest], limit)
        wire[largest] = fitted[largest].to_wire()
        raw = _raw(wire, wire_tools)
    return Fitted(fitted, raw, math.ceil(raw * ratio), wire)


_NOTE_CHARS = 200
_WHAT = {"tool": "tool result", "user": "message", "assistant": "answer"}


def _cuttable(message: ChatMessage, index: int) -> bool:
    return index > 0 and message.role in _WHAT and isinstance(message.content, str)


def _largest_cuttable(messages: Sequence[ChatMessage]) -> int | None:
    sizes = [
        (len(m.text()), i)
        for i, m in enumerate(messages)
        if _cuttable(m, i) and len(m.text()) > MIN_KEPT_CHARS + _NOTE_CHARS
    ]
    return max(sizes)[1] if sizes else None


def _cut(message: ChatMessage, limit: int) -> ChatMessage:
    return replace(message, content=cut_tool_result(message.text(), limit, _WHAT[message.role]))


def is_summary(message: ChatMessage) -> bool:
    """A stored compaction summary: the history's only kind of ``system`` row."""
    return message.role == "system"


def summary_first(history: list[StoredMessage]) -> list[StoredMessage]:
    """The active history with the compaction summary first (it is stored after the rows
    it leaves active, so the store's id order puts it last)."""
    summaries = [m for m in history if m.message.role == "system"]  # is_summary, inlined
    if not summaries:
        return history
    return summaries + [m for m in history if m.message.role != "system"]


def as_sent(messages: Iterable[ChatMessage]) -> list[ChatMessage]:
    """The request's history: a summary becomes a user message and :data:`SUMMARY_ACK`."""
    sent: list[ChatMessage] = []
    for message in messages:
        if message.role == "system":  # is_summary, inlined: once per message per call
            sent.append(ChatMessage(role="user", content=message.content))
            sent.append(ChatMessage(role="assistant", content=SUMMARY_ACK))
        else:
            sent.append(message)
    return sent
