"""Repair a session's stored history on load, so a strict server accepts it
(``docs/turn-loop.md`` §15).

Older versions stored what a strict server (llama.cpp's ``llama-server --jinja``, OpenAI)
rejects for the whole request — and so for every later turn of the session:

- a tool call whose arguments are not JSON (a generation cut off inside them, or ``""``):
  it is sent with ``{}`` (:func:`core.model.arguments.sendable_call`); its stored tool
  result, which told the model the arguments were invalid, stays;
- a tool result whose call is not in the assistant message before it: left out;
- an assistant message with neither text nor tool calls: left out when sending
  (:func:`core.agent.transcript.is_empty_reply`, in ``Transcript.for_model``);
- a turn that ended without an answer (stopped, failed, an empty reply) leaves its user
  message unanswered, so the next request would hold two user messages in a row — or a
  user message right after a tool result — and a chat template that insists on
  alternation (llama.cpp's Mistral templates: "conversation roles must alternate", HTTP 400)
  refuses it, and every later turn with it. :func:`alternating` puts
  :data:`NO_ANSWER` as the assistant's turn before such a user message (tool calls and
  their results do not count, as those templates count).

The repair is made in memory, for the request: the store is not rewritten, nothing is lost,
and sessions stored before this are repaired the same way.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Protocol, TypeVar

from core.model.arguments import sendable_call
from core.types import ChatMessage

logger = logging.getLogger(__name__)


class HasMessage(Protocol):
    message: ChatMessage


E = TypeVar("E", bound=HasMessage)


def repaired(entries: list[E]) -> list[E]:
    """``entries`` with broken tool-call arguments made ``{}`` and orphan tool results out."""
    kept: list[E] = []
    calls: set[str] = set()
    for entry in entries:
        message = entry.message
        if message.role == "tool":
            if (message.tool_call_id or "") not in calls:
                logger.warning("history: a tool result without its call is not sent")
                continue
        else:
            calls = {call.id for call in message.tool_calls}
            entry.message = _sendable(message)
        kept.append(entry)
    return kept


NO_ANSWER = "[No answer: this request was stopped or failed before the assistant answered.]"
"""The assistant's turn a request puts after a user message its turn never answered."""


def alternating(messages: list[ChatMessage]) -> list[ChatMessage]:
    """``messages`` (after the system prompt) with :data:`NO_ANSWER` before every user
    message whose previous user message got no plain assistant answer."""
    fixed: list[ChatMessage] = []
    last: str | None = None
    for message in messages:
        counted = message.role in ("user", "assistant") and not message.tool_calls
        if counted and message.role == "user" and last == "user":
            fixed.append(ChatMessage(role="assistant", content=NO_ANSWER))
        if counted:
            last = message.role
        fixed.append(message)
    return fixed


def _sendable(message: ChatMessage) -> ChatMessage:
    calls = tuple(sendable_call(call) for call in message.tool_calls)
    if calls == message.tool_calls:
        return message
    logger.warning("history: a stored tool call with arguments that are not JSON is sent as {}")
    return replace(message, tool_calls=calls)
