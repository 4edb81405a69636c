"""The Chat Completions wire format: the request body we send and the reply we read.

Parsing is strict about what we need (``choices[0].message``) and lenient about the rest
(missing ``usage``, tool-call ``arguments`` given as an object instead of JSON text). A
reply we cannot use raises :class:`ModelError` of kind ``bad_response`` naming what is wrong.
Tool-call arguments that are not JSON (a generation cut off inside them) are replaced by
``{}`` with the model's text kept on the call (:mod:`core.model.arguments`), and
``finish_reason`` is read into :data:`core.types.FinishReason` (``docs/turn-loop.md`` §17).

The reply is an edge (:mod:`core.text`): each text read from it — content, a tool call's
id, name and arguments, an error object — has its lone surrogates replaced with U+FFFD
here, so no reply text can fail later when it is stored, shown or sent back. The request
body is built from text already made valid where it entered and is not walked again.
"""

from __future__ import annotations

import json
from typing import Any

from core.model.arguments import checked_call
from core.model.base import ModelRequest
from core.model.classify import bad_response, classify_error_object, quote
from core.model.errors import ModelError
from core.text import valid_json, valid_text
from core.types import FinishReason, ModelReply, ToolCall, Usage

Json = dict[str, Any]

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
    "function_call": "tool_calls",  # the legacy functions API
    "max_tokens": "length",  # some proxies pass on the upstream's word
    "eos": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
}


def request_body(model: str, request: ModelRequest, *, stream_usage: bool) -> Json:
    """The JSON body for ``POST {base_url}/chat/completions``."""
    wire = request.wire
    messages = list(wire) if wire is not None else [m.to_wire() for m in request.messages]
    body: Json = {"model": model, "messages": messages}
    if request.tools:
        body["tools"] = [tool.wire for tool in request.tools]
    if request.stream:
        body["stream"] = True
        if stream_usage:
            body["stream_options"] = {"include_usage": True}
    body.update(request.extra)
    return body


def parse_json(text: str, what: str, status: int | None = None) -> Any:
    """Decode JSON or raise ``bad_response`` quoting the start of the text."""
    try:
        return json.loads(text)
    except ValueError:
        shown = quote(text) if text.strip() else "(empty body)"
        raise ModelError(bad_response(f"{what} is not JSON: {shown}", status=status)) from None


def parse_reply(payload: Any, status: int | None = None) -> ModelReply:
    """A non-streamed completion (already decoded) into a :class:`ModelReply`."""
    if not isinstance(payload, dict):
        raise ModelError(bad_response("model reply is not a JSON object", status=status))
    if "error" in payload and "choices" not in payload:
        raise ModelError(classify_error_object(valid_json(payload["error"]), status=status))
    choice = first_choice(payload, status)
    message = choice.get("message")
    if not isinstance(message, dict):
        raise ModelError(bad_response("model reply choice has no 'message' object", status=status))
    return ModelReply(
        content=_content(message.get("content")),
        tool_calls=tuple(_tool_call(raw, n) for n, raw in enumerate(_list(message, "tool_calls"))),
        finish_reason=finish_reason(choice.get("finish_reason")),
        usage=parse_usage(payload.get("usage"), payload.get("timings")),
    )


def first_choice(payload: Json, status: int | None = None) -> Json:
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        shown = quote(json.dumps(payload))
        raise ModelError(bad_response(f"model reply has no 'choices': {shown}", status=status))
    choice: Json = choices[0]
    return choice


def parse_usage(raw: object, timings: object = None) -> Usage:
    """``usage`` of a reply or chunk; its cached prompt tokens from OpenAI's (and
    llama-server's) ``usage.prompt_tokens_details.cached_tokens``, else llama-server's
    ``timings.cache_n`` beside it."""
    if not isinstance(raw, dict):
        return Usage()
    return Usage(
        prompt_tokens=_int(raw.get("prompt_tokens")),
        completion_tokens=_int(raw.get("completion_tokens")),
        cached_tokens=_cached(raw.get("prompt_tokens_details"), timings),
    )


def _cached(details: object, timings: object) -> int:
    if isinstance(details, dict) and "cached_tokens" in details:
        return _int(details.get("cached_tokens"))
    return _int(timings.get("cache_n")) if isinstance(timings, dict) else 0


def finish_reason(raw: object) -> FinishReason | None:
    """The server's ``finish_reason`` in our words; ``None`` when absent or unknown."""
    return _FINISH_REASONS.get(raw) if isinstance(raw, str) else None


def arguments_text(raw: object) -> str:
    """Tool-call arguments as JSON text (some servers send an object, not a string)."""
    if isinstance(raw, str):
        return valid_text(raw)
    if raw is None:
        return ""
    return json.dumps(valid_json(raw))


def _tool_call(raw: object, position: int) -> ToolCall:
    if not isinstance(raw, dict) or not isinstance(raw.get("function"), dict):
        raise ModelError(bad_response(f"tool call #{position} has no 'function' object"))
    function = raw["function"]
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ModelError(bad_response(f"tool call #{position} has no function name"))
    call_id = raw.get("id")
    return checked_call(
        valid_text(call_id) if isinstance(call_id, str) and call_id else f"call_{position}",
        valid_text(name),
        arguments_text(function.get("arguments")),
    )


def _content(raw: object) -> str | None:
    if raw is None:
        return raw
    if isinstance(raw, str):
        return valid_text(raw)
    if isinstance(raw, list):  # content parts: keep the text ones
        return valid_text("".join(str(p.get("text", "")) for p in raw if isinstance(p, dict)))
    raise ModelError(bad_response(f"model reply content is a {type(raw).__name__}, not text"))


def _list(obj: Json, key: str) -> list[Any]:
    value = obj.get(key)
    return value if isinstance(value, list) else []


def _int(raw: object) -> int:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else 0
