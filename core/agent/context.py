"""How full a session's context is, and what a request may hold (``docs/turn-loop.md`` §17).

The model's context window is counted in tokens, and only the server can count them. Before
each call the engine makes a cheap estimate instead: the UTF-8 bytes of the request's
messages and tool specs, serialised as they are sent, divided by :data:`BYTES_PER_TOKEN`.
Each reply's ``usage.prompt_tokens`` corrects it: :class:`ContextMeter` keeps, per session,
the ratio of the reported count to the raw estimate of the same request, and scales later
estimates by it (a tokenizer that makes 1.3 tokens of four bytes is learnt after one call).

Two more things live here because every request goes through them:

* a single tool result larger than :data:`TOOL_RESULT_SHARE` of the window is cut, head
  and tail kept, with a note saying how much was left out (:func:`cut_tool_result`); the
  stored result stays whole, the same cut is made on every request (byte-identical);
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
"""A single tool result may fill at most this share of the window."""
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
    wire = [_textual(m.to_wire()) for m in messages] + [t.to_wire() for t in tools]
    size = len(json.dumps(wire, ensure_ascii=False).encode())
    return math.ceil(size / BYTES_PER_TOKEN) + IMAGE_TOKENS * sum(map(_images, messages))


def _images(message: ChatMessage) -> int:
    content = message.content
    return (
        sum(1 for p in content if p.get("type") == "image_url") if isinstance(content, list) else 0
    )


def _textual(wire: dict[str, Any]) -> dict[str, Any]:
    content = wire.get("content")
    if isinstance(content, list):
        wire["content"] = [p for p in content if p.get("type") != "image_url"]
    return wire


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
    """Estimates corrected by what the server reported, per session (in memory)."""

    def __init__(self) -> None:
        self._ratios: BoundedMap[str, float] = BoundedMap(REMEMBERED_SESSIONS)

    def estimate(
        self, session_id: str, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> int:
        """The request's tokens: the raw estimate scaled by the session's learnt ratio."""
        return math.ceil(raw_estimate(messages, tools) * self._ratios.get(session_id, 1.0))

    def observe(self, session_id: str, raw: int, reported: int) -> None:
        """The server counted ``reported`` prompt tokens for a request estimated ``raw``."""
        if raw <= 0 or reported <= 0:
            return  # no usage reported: keep what was learnt
        ratio = min(MAX_RATIO, max(MIN_RATIO, reported / raw))
        self._ratios.put(session_id, ratio)


def tool_result_limit(window: int) -> int:
    """The most characters one tool result may send (a share of the window)."""
    return int(window * TOOL_RESULT_SHARE) * BYTES_PER_TOKEN


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


def fit_tool_results(messages: Iterable[ChatMessage], window: int) -> list[ChatMessage]:
    """The messages with every oversized tool result cut (:func:`cut_tool_result`)."""
    limit = tool_result_limit(window)
    fitted: list[ChatMessage] = []
    for message in messages:
        text = message.text()
        if message.role == "tool" and len(text) > limit:
            message = replace(message, content=cut_tool_result(text, limit))
        fitted.append(message)
    return fitted


def is_summary(message: ChatMessage) -> bool:
    """A stored compaction summary: the history's only kind of ``system`` row."""
    return message.role == "system"


def summary_first(history: list[StoredMessage]) -> list[StoredMessage]:
    """The active history with the compaction summary first (it is stored after the rows
    it leaves active, so the store's id order puts it last)."""
    summaries = [m for m in history if is_summary(m.message)]
    return summaries + [m for m in history if not is_summary(m.message)]


def as_sent(messages: Iterable[ChatMessage]) -> list[ChatMessage]:
    """The request's history: a summary becomes a user message and :data:`SUMMARY_ACK`."""
    sent: list[ChatMessage] = []
    for message in messages:
        if is_summary(message):
            sent.append(ChatMessage(role="user", content=message.content))
            sent.append(ChatMessage(role="assistant", content=SUMMARY_ACK))
        else:
            sent.append(message)
    return sent
