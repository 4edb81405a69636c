"""Leaf module of plain values shared by the whole engine.

Everything here is a frozen (or small mutable) dataclass or a type alias; this module
imports nothing of ours, so every other module may import it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
Content = str | list[dict[str, Any]] | None
Risk = Literal["safe", "moderate", "dangerous"]

TurnStatus = Literal["running", "completed", "interrupted", "budget_exhausted", "failed"]
"""How a turn ended. ``running`` is only ever seen while the turn is in flight."""

ExitReason = Literal[
    "text_response",
    "interrupted_by_user",
    "budget_exhausted",
    "review_input_budget_exhausted",
    "cancelled",
    "model_error",
    "external_runtime",
    "crashed",
    "quota_exceeded",
]
"""Why the loop exited: an observable field, queryable from the store (``docs/turn-loop.md`` §8)."""

ApprovalState = Literal["pending", "approved", "denied", "timed_out", "cancelled"]

FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]
"""Why the model stopped: it was done, hit its output limit, called tools, or was filtered
(``None`` on a reply when the server did not say; ``docs/turn-loop.md`` §17)."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call as the model asked for it; ``arguments`` is its JSON text.

    ``unparsed`` is the model's own text when it was not JSON (a generation cut off inside
    the arguments): ``arguments`` is then ``"{}"``, so what is stored and sent back is valid,
    and the call is never run (``core/model/arguments.py``, ``docs/turn-loop.md`` §5). It is
    not part of the wire form nor stored with the message.
    """

    id: str
    name: str
    arguments: str
    unparsed: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(slots=True)
class ChatMessage:
    """A message in OpenAI Chat Completions shape.

    Mutable on purpose: ``/steer`` appends to the content of the latest tool message in
    place (``docs/turn-loop.md`` §10) rather than adding a new message.
    """

    role: Role
    content: Content = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            wire["tool_calls"] = [call.to_wire() for call in self.tool_calls]
        if self.tool_call_id is not None:
            wire["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            wire["name"] = self.name
        return wire

    def text(self) -> str:
        """The content as plain text (text blocks joined) for display and search."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")


def tool_calls_to_json(calls: tuple[ToolCall, ...]) -> str | None:
    """Serialise tool calls for storage (``None`` when there are none)."""
    if not calls:
        return None
    return json.dumps([call.to_wire() for call in calls])


def tool_calls_from_json(raw: str | None) -> tuple[ToolCall, ...]:
    """Inverse of :func:`tool_calls_to_json`."""
    if not raw:
        return ()
    return tuple(
        ToolCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
        for c in json.loads(raw)
    )


@dataclass(frozen=True, slots=True)
class Usage:
    """A model call's tokens as its server counted them (``cached_tokens``: the part of
    the prompt served from the server's prompt cache), or estimated when it said none."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False

    @property
    def reported(self) -> bool:
        """Whether the server gave any figure (all zero: it gave none)."""
        return bool(self.prompt_tokens or self.completion_tokens or self.cached_tokens)


@dataclass(frozen=True, slots=True)
class ModelReply:
    """One complete answer of the model (streamed replies are assembled into this)."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason | None = None
    usage: Usage = field(default_factory=Usage)

    def to_message(self) -> ChatMessage:
        return ChatMessage(role="assistant", content=self.content, tool_calls=self.tool_calls)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model sees of a tool, plus what the engine needs to run it safely."""

    name: str
    description: str
    parameters: dict[str, Any]
    risk: Risk = "safe"
    interactive: bool = False
    wire: dict[str, Any] = field(init=False, repr=False, compare=False)
    """The spec as the model gets it (Chat Completions ``tools`` item), made once with the
    spec: every request and every context estimate sends the same tools. Never changed."""

    def __post_init__(self) -> None:
        function = {"name": self.name, "description": self.description}
        wire = {"type": "function", "function": {**function, "parameters": self.parameters}}
        object.__setattr__(self, "wire", wire)

    def to_wire(self) -> dict[str, Any]:
        return self.wire
