"""What a test scripts (``Reply`` and the ``reply_*`` builders) and what it reads back
(``ReceivedRequest``) from the :class:`~tests.support.model_server.ScriptedModelServer`.

See the model server's module docstring for the whole API.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

Json = dict[str, Any]
ToolCallScript = tuple[str, str, "dict[str, Any] | str"]


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer. Build it with the ``reply_*`` functions."""

    status: int = 200
    content: str | None = None
    tool_calls: tuple[ToolCallScript, ...] = ()
    finish_reason: str | None = None
    chunks: tuple[str, ...] | None = None
    arg_fragments: int = 3
    interleave: bool = False
    body: bytes | None = None
    content_type: str = "application/json"
    sse_events: tuple[str, ...] | None = None
    done_marker: bool = True
    headers: Mapping[str, str] = field(default_factory=dict)
    usage: tuple[int, int] | None = None
    cached_tokens: int | None = None
    """Reported as ``usage.prompt_tokens_details.cached_tokens`` (OpenAI, llama-server)."""
    delay: float = 0.0
    hold: bool = False
    until: asyncio.Event | None = None
    stall_after: int | None = None
    abort_after: int | None = None
    gap: float = 0.0
    """Streaming: seconds between two events (a slow but flowing stream)."""
    ping_every: float | None = None
    """Streaming: while waiting (``gap``, a stall), an SSE ``:`` comment this often."""


ScriptItem = Reply | Callable[["ReceivedRequest"], Reply]


@dataclass(slots=True)
class ReceivedRequest:
    """A request the server received; ``body`` is the parsed JSON (``None`` if not JSON)."""

    index: int
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any
    at: float
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    closed_at: float | None = None
    prompt_tokens: int | None = None
    """The prompt's size as the server counted it (``server.count_tokens``), reported as
    ``usage.prompt_tokens`` when the reply scripts no usage."""

    @property
    def messages(self) -> list[Json]:
        """The conversation the request carries: :attr:`wire_messages` with the engine's
        clock note (``\n\n[Current time: … UTC]``, the volatile prompt tier, which rides on
        the last user message for the model only — ``docs/turn-loop.md`` §2 step 3) taken
        off that message, so a test reads what the user said. The note must be exactly
        where and how the engine puts it to be taken off."""
        return without_clock_note(self.wire_messages)

    @property
    def wire_messages(self) -> list[Json]:
        """The ``messages`` exactly as sent."""
        return list(self._field("messages", []))

    @property
    def tools(self) -> list[Json]:
        return list(self._field("tools", []))

    @property
    def tool_names(self) -> list[str]:
        return [tool["function"]["name"] for tool in self.tools]

    @property
    def stream(self) -> bool:
        return bool(self._field("stream", False))

    @property
    def model(self) -> str | None:
        value = self._field("model", None)
        return value if isinstance(value, str) else None

    @property
    def last_user_text(self) -> str:
        users = [m for m in self.messages if m.get("role") == "user"]
        return str(users[-1].get("content") or "") if users else ""

    def _field(self, key: str, default: Any) -> Any:
        return self.body.get(key, default) if isinstance(self.body, dict) else default


CLOCK_NOTE = re.compile(r"\n\n\[Current time: [A-Z][a-z]+day \d{4}-\d\d-\d\d \d\d:\d\d UTC\]\Z")
"""The volatile tier as :func:`core.agent.prompt.clock_note` appends it to a user message."""


def without_clock_note(messages: Sequence[Json]) -> list[Json]:
    """``messages`` with the clock note taken off the last user message (if it has one)."""
    result = list(messages)
    users = [n for n, m in enumerate(result) if m.get("role") == "user"]
    if users and isinstance(content := result[users[-1]].get("content"), str):
        result[users[-1]] = {**result[users[-1]], "content": CLOCK_NOTE.sub("", content)}
    return result


def reply_text(text: str, *, chunks: Sequence[str] | None = None, **options: Any) -> Reply:
    return Reply(content=text, chunks=tuple(chunks) if chunks else None, **options)


def reply_tool_calls(
    calls: Sequence[ToolCallScript], *, content: str | None = None, **options: Any
) -> Reply:
    return Reply(content=content, tool_calls=tuple(calls), **options)


def reply_tool_call(
    name: str, arguments: dict[str, Any] | str, *, id: str = "call_1", **options: Any
) -> Reply:
    return reply_tool_calls([(id, name, arguments)], **options)


def reply_error(
    status: int,
    message: str = "scripted error",
    *,
    code: str | None = None,
    type: str = "server_error",
    headers: dict[str, str] | None = None,
    **options: Any,
) -> Reply:
    error = {"message": message, "type": type, "code": code, "param": None}
    return reply_json({"error": error}, status=status, headers=headers, **options)


def reply_rate_limited(retry_after: float | None = None, **options: Any) -> Reply:
    headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
    message = "Rate limit reached for requests"
    return reply_error(429, message, code="rate_limit_exceeded", headers=headers, **options)


def reply_json(
    obj: Any, *, status: int = 200, headers: dict[str, str] | None = None, **options: Any
) -> Reply:
    body = json.dumps(obj)
    return reply_raw(
        body, status=status, content_type="application/json", headers=headers, **options
    )


def reply_raw(
    body: str | bytes,
    *,
    status: int = 200,
    content_type: str = "text/html",
    headers: dict[str, str] | None = None,
    **options: Any,
) -> Reply:
    data = body.encode() if isinstance(body, str) else body
    return Reply(
        status=status, body=data, content_type=content_type, headers=dict(headers or {}), **options
    )


def reply_sse(events: Sequence[str | Json], *, done: bool = True, **options: Any) -> Reply:
    payloads = tuple(e if isinstance(e, str) else json.dumps(e) for e in events)
    return Reply(sse_events=payloads, done_marker=done, **options)


def reply_hang(
    then: Reply | None = None, *, until: asyncio.Event | None = None, **options: Any
) -> Reply:
    after = then or reply_text("released")
    return replace(after, hold=True, until=until, **options)
