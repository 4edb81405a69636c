"""Values that go into and come out of ``CommonAgent.run_turn``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from core.attachments import Attachment
from core.tools.base import QueueFile as QueueFile  # run_turn's on_file (re-exported)
from core.types import ExitReason, TurnStatus


@dataclass(frozen=True, slots=True)
class UserMessage:
    text: str
    sender_id: str | None = None
    sender_name: str | None = None
    origin: str | None = None
    """The inbound update this message came from (``"<platform>:<update id>"``), so the
    gateway can mark exactly that update handled when this message's turn is over."""
    attachments: tuple[Attachment, ...] = ()
    """The files it came with, saved in the session's workspace (the gateway's intake did
    that before the turn: docs/attachments.md); the model sees them as image parts or
    notes (:mod:`core.agent.attachment_content`)."""
    also: tuple[str, ...] = ()
    """The origins of the other updates merged into this one message (``debounce_ms``,
    :mod:`core.debounce`): a replay of any of them finds the one stored message."""
    command: Literal["compact"] | None = None
    """Not a message for the model but a chat command run in the session's lane like a
    turn (``/compact``, ``docs/turn-loop.md`` §18): queued behind the session's turn, and
    ``/stop`` cancels it like one."""

    @property
    def origins(self) -> tuple[str, ...]:
        """Every inbound update this message carries (its own origin first)."""
        own = () if self.origin is None else (self.origin,)
        return (*own, *self.also)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResult:
    turn_id: str
    session_id: str
    status: TurnStatus
    exit_reason: ExitReason
    reply: str | None
    iterations: int
    error: str | None = None


StepCallback = Callable[[int, list[dict[str, Any]]], Any]
"""``step_callback(iteration, prev_tools)``; ``prev_tools`` is a list of
``{"name", "result", "arguments"}`` of the latest assistant tool-call message. May be sync
or async; an exception is logged at debug level and never affects the turn."""
