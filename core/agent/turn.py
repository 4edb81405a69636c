"""Values that go into and come out of ``CommonAgent.run_turn``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from core.attachments import Attachment, OutgoingFile
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


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResult:
    turn_id: str
    session_id: str
    status: TurnStatus
    exit_reason: ExitReason
    reply: str | None
    iterations: int
    error: str | None = None


QueueFile = Callable[[OutgoingFile], Awaitable[str | None]]
"""``run_turn``'s ``on_file``: keep a file the agent sends (``send_file``) for delivery
after the reply; returns None when queued, else why it cannot be sent (the chat cannot
take files, over the platform's upload limit) for the tool's result."""

StepCallback = Callable[[int, list[dict[str, Any]]], Any]
"""``step_callback(iteration, prev_tools)``; ``prev_tools`` is a list of
``{"name", "result", "arguments"}`` of the latest assistant tool-call message. May be sync
or async; an exception is logged at debug level and never affects the turn."""
