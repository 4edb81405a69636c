"""The OpenAI Chat Completions wire format the scripted model server writes.

A :class:`Reply` becomes either one ``chat.completion`` JSON object, or a list of
``chat.completion.chunk`` SSE payloads shaped like OpenAI's: a role chunk, text pieces,
tool calls as id/name first then argument fragments (by ``index``), a finish chunk, and a
usage chunk when the request asked for ``stream_options.include_usage``.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from tests.support.model_replies import Json, ReceivedRequest, Reply, ToolCallScript


def completion_json(reply: Reply, request: ReceivedRequest, number: int) -> Json:
    message: Json = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [_call_wire(call) for call in reply.tool_calls]
    return {
        **_envelope(request, number, "chat.completion"),
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
        "usage": _usage(reply, request),
    }


def stream_events(reply: Reply, request: ReceivedRequest, number: int) -> list[str]:
    """The SSE ``data:`` payloads for a completion (without ``[DONE]``)."""
    if reply.sse_events is not None:
        return list(reply.sse_events)
    head = _envelope(request, number, "chat.completion.chunk")
    deltas: list[Json] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": piece} for piece in _text_pieces(reply)]
    deltas += [{"tool_calls": [piece]} for piece in _call_pieces(reply)]
    chunks = [_chunk(head, delta, None) for delta in deltas]
    chunks.append(_chunk(head, {}, _finish(reply)))
    if _field(request, "stream_options", {}).get("include_usage"):
        chunks.append({**head, "choices": [], "usage": _usage(reply, request)})
    return [json.dumps(chunk) for chunk in chunks]


def _envelope(request: ReceivedRequest, number: int, kind: str) -> Json:
    model = request.model or "scripted-model"
    return {"id": f"chatcmpl-scripted-{number}", "object": kind, "created": 0, "model": model}


def _chunk(head: Json, delta: Json, finish: str | None) -> Json:
    return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _text_pieces(reply: Reply) -> list[str]:
    if reply.chunks is not None:
        return list(reply.chunks)
    if not reply.content:
        return []
    words = reply.content.split(" ")
    return [piece for piece in [w + " " for w in words[:-1]] + [words[-1]] if piece]


def _call_pieces(reply: Reply) -> list[Json]:
    per_call = [
        _one_call_pieces(n, call, reply.arg_fragments) for n, call in enumerate(reply.tool_calls)
    ]
    if not reply.interleave:
        return [piece for pieces in per_call for piece in pieces]
    rounds = itertools.zip_longest(*per_call)
    return [piece for round_ in rounds for piece in round_ if piece is not None]


def _one_call_pieces(index: int, call: ToolCallScript, fragments: int) -> list[Json]:
    call_id, name, _ = call
    arguments = _arguments(call)
    first = {"index": index, "id": call_id, "type": "function"}
    first["function"] = {"name": name, "arguments": ""}
    size = max(1, -(-len(arguments) // max(1, fragments)))
    parts = [arguments[i : i + size] for i in range(0, len(arguments), size)]
    return [first] + [{"index": index, "function": {"arguments": part}} for part in parts]


def _call_wire(call: ToolCallScript) -> Json:
    call_id, name, _ = call
    function = {"name": name, "arguments": _arguments(call)}
    return {"id": call_id, "type": "function", "function": function}


def _arguments(call: ToolCallScript) -> str:
    raw = call[2]
    return raw if isinstance(raw, str) else json.dumps(raw)


def _finish(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _usage(reply: Reply, request: ReceivedRequest) -> Json:
    if reply.usage is not None:
        prompt, completion = reply.usage
    else:
        counted = request.prompt_tokens
        prompt = counted if counted is not None else len(json.dumps(request.messages)) // 4
        completion = len(reply.content or "") // 4 + 10 * len(reply.tool_calls)
    usage: Json = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if reply.cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
    return usage


def _field(request: ReceivedRequest, key: str, default: Any) -> Any:
    value = request.body.get(key, default) if isinstance(request.body, dict) else default
    return value if isinstance(value, type(default)) else default
