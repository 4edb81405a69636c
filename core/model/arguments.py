"""Tool-call arguments a strict server accepts back (``docs/turn-loop.md`` §5, §15).

A model's tool call carries its arguments as JSON text. When a generation is cut off
inside them (``{``, ``{"comm``) or the model sends ``""``, that text is not JSON — and a
strict server (llama.cpp's ``llama-server --jinja``) parses the arguments of *every*
assistant tool call in the history and answers HTTP 500 "Failed to parse tool call
arguments as JSON" to the whole request, so every later request of the session would fail.

So what the model client hands on is always valid JSON: empty arguments become ``{}`` (a
call without arguments, run as such), and text that does not parse becomes ``{}`` with the
model's text kept in :attr:`ToolCall.unparsed` — such a call is never run; the model gets an
error result naming the text instead (:mod:`core.agent.tool_runner`).
"""

from __future__ import annotations

import json

from core.types import ToolCall

EMPTY_OBJECT = "{}"


def is_json(text: str) -> bool:
    """``text`` is JSON a strict parser accepts (no ``NaN``/``Infinity``, no trailing junk)."""
    try:
        json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        return False
    return True


def sendable_arguments(raw: str) -> tuple[str, str | None]:
    """``(arguments to send and store, the model's text when it was not JSON)``."""
    if not raw.strip():
        return EMPTY_OBJECT, None
    if is_json(raw):
        return raw, None
    return EMPTY_OBJECT, raw


def checked_call(call_id: str, name: str, raw_arguments: str) -> ToolCall:
    """A tool call whose ``arguments`` are valid JSON (see the module docstring)."""
    arguments, unparsed = sendable_arguments(raw_arguments)
    return ToolCall(call_id, name, arguments, unparsed=unparsed)


def sendable_call(call: ToolCall) -> ToolCall:
    """``call`` as a strict server accepts it back: a stored call with broken arguments
    (written by an older version) is sent with ``{}``."""
    arguments, unparsed = sendable_arguments(call.arguments)
    if unparsed is None and arguments == call.arguments:
        return call
    return ToolCall(call.id, call.name, arguments, unparsed=unparsed or call.unparsed)


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")
