"""Repair a session's stored history on load, so a strict server accepts it
(``docs/turn-loop.md`` §15).

Older versions stored what a strict server (llama.cpp's ``llama-server --jinja``, OpenAI)
rejects for the whole request — and so for every later turn of the session:

- a tool call whose arguments are not JSON (a generation cut off inside them, or ``""``):
  it is sent with ``{}`` (:func:`core.model.arguments.sendable_call`); its stored tool
  result, which told the model the arguments were invalid, stays;
- a tool result whose call is not in the assistant message before it: left out;
- an assistant message with neither text nor tool calls: left out when sending
  (:func:`core.agent.transcript.is_empty_reply`, in ``Transcript.for_model``).

The repair is made in memory, for the request: the store is not rewritten, nothing is lost.
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


def _sendable(message: ChatMessage) -> ChatMessage:
    calls = tuple(sendable_call(call) for call in message.tool_calls)
    if calls == message.tool_calls:
        return message
    logger.warning("history: a stored tool call with arguments that are not JSON is sent as {}")
    return replace(message, tool_calls=calls)
