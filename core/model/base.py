"""The model port.

A ``ModelClient`` turns a list of chat messages (plus tool specs) into one ``ModelReply``.
Cancelling the awaiting task must abort any in-flight HTTP request at once; nothing
partial is returned from a cancelled call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.types import ChatMessage, ModelReply, ToolSpec

DeltaCallback = Callable[[str], Awaitable[None]]
"""Receives each streamed text fragment, in order (only when streaming)."""

ActivityCallback = Callable[[], None]
"""Told, synchronously and cheaply, each time a streamed reply sends an event (text,
tool-call pieces, usage; not keep-alive comments): the reply is flowing."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    messages: Sequence[ChatMessage]
    tools: Sequence[ToolSpec] = ()
    stream: bool = False
    on_delta: DeltaCallback | None = None
    on_activity: ActivityCallback | None = None
    extra: dict[str, object] = field(default_factory=dict)
    """Extra top-level request fields (temperature, max_tokens, ...)."""
    estimated: int | None = None
    """The request's size as :func:`core.agent.context.raw_estimate` counts it, when the
    turn's context keeper made it (once per call); never sent."""
    wire: Sequence[dict[str, Any]] | None = None
    """:attr:`messages` in their Chat Completions form, when the turn's context keeper
    made it for its estimate (once per call): sent as it is instead of made again. None:
    the client makes it from :attr:`messages`."""


class ModelClient(Protocol):
    """Anything that can answer a chat completion request."""

    @property
    def model(self) -> str: ...

    async def complete(self, request: ModelRequest) -> ModelReply:
        """Return the model's reply, or raise :class:`core.model.errors.ModelError`."""
        ...

    async def aclose(self) -> None: ...
