"""A scripted OpenAI-compatible model server for tests and benchmarks.

``ScriptedModelServer`` is an aiohttp server on ``127.0.0.1:<free port>`` running in the
caller's event loop. It speaks ``POST /v1/chat/completions`` (plain JSON, or SSE when the
request says ``"stream": true``) and ``GET /v1/models``. Instead of thinking, it answers
each request with the next reply a test scripted, in order, and keeps every request::

    async with ScriptedModelServer() as server:          # or the ``model_server`` fixture
        server.script(
            reply_tool_calls([("call_1", "terminal", {"command": "ls"})]),
            reply_text("Done: 2 files."),
        )
        client = OpenAIClient(base_url=server.url, model="m")   # server.url ends in /v1
        ...
        first = server.requests[0]            # ReceivedRequest: .body (parsed JSON),
        first.messages, first.tools           # .messages, .tools, .stream, .headers, .at

Replies (all return a :class:`Reply`; keyword options below apply to every one):

- ``reply_text("hi")``                             text; streamed word by word, or as
  ``chunks=["h", "i"]`` when given
- ``reply_tool_calls([(id, name, args), ...])``     one or several tool calls; ``args`` is a
  dict or raw JSON text; streamed as id/name first, then ``arg_fragments`` argument pieces
  (``interleave=True`` interleaves the calls' fragments, as some providers do)
- ``reply_tool_call(name, args, id="call_1")``      shorthand for one call
- ``reply_error(status, message, code=..., headers={"Retry-After": "1"})``  an OpenAI-style
  ``{"error": {...}}`` body; ``reply_rate_limited(retry_after=0.2)`` is a 429 with Retry-After
- ``reply_json(obj, status=200)``                   any JSON body (wrong shapes)
- ``reply_raw("<html>…", status=200, content_type="text/html")``  any bytes (non-JSON)
- ``reply_sse([chunk_or_text, ...], done=True)``    verbatim SSE ``data:`` payloads
- ``reply_hang(then=reply_text(...), until=event)`` waits until ``event`` (default: the
  server's own, set by ``server.release()``) is set, then sends ``then``

Keyword options on every reply: ``delay=0.2`` (seconds before answering), ``hold=True`` with
``until=event`` (wait before answering), ``stall_after=n`` (streaming: send ``n`` events,
then wait like ``hold``), ``abort_after=n`` (streaming: send ``n`` events, then drop the
connection), ``headers={...}``, ``usage=(prompt, completion)``.

A script item may also be a function ``(ReceivedRequest) -> Reply`` to answer from the
request. When the script is used up, ``server.default`` answers (e.g. for a benchmark:
``server.default = reply_text("ok")``); if that is ``None`` the request gets HTTP 500 naming
the problem and ``server.unscripted`` counts it.

Waiting is event-driven: ``await server.wait_for_requests(n)`` returns once ``n`` requests
arrived; each ``ReceivedRequest.closed`` is an ``asyncio.Event`` set when the client went
away before the reply was complete (``closed_at`` is its ``time.monotonic()``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import web

_log = logging.getLogger(__name__)

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
    headers: tuple[tuple[str, str], ...] = ()
    usage: tuple[int, int] | None = None
    delay: float = 0.0
    hold: bool = False
    until: asyncio.Event | None = None
    stall_after: int | None = None
    abort_after: int | None = None
    then: Reply | None = None

    @property
    def is_completion(self) -> bool:
        return self.status < 400 and self.body is None and self.sse_events is None


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

    @property
    def messages(self) -> list[Json]:
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


# ---------------------------------------------------------------------------- replies


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
    return reply_raw(json.dumps(obj), status=status, headers=headers, **options)


def reply_raw(
    body: str | bytes,
    *,
    status: int = 200,
    content_type: str = "text/html",
    headers: dict[str, str] | None = None,
    **options: Any,
) -> Reply:
    data = body.encode() if isinstance(body, str) else body
    header_items = tuple((headers or {}).items())
    kind = "application/json" if content_type == "text/html" and _is_json(data) else content_type
    return Reply(status=status, body=data, content_type=kind, headers=header_items, **options)


def reply_sse(events: Sequence[str | Json], *, done: bool = True, **options: Any) -> Reply:
    payloads = tuple(e if isinstance(e, str) else json.dumps(e) for e in events)
    return Reply(sse_events=payloads, done_marker=done, **options)


def reply_hang(
    then: Reply | None = None, *, until: asyncio.Event | None = None, **options: Any
) -> Reply:
    after = then or reply_text("released")
    return replace(after, hold=True, until=until, **options)


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------------------- wire format


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
        prompt = len(json.dumps(request.messages)) // 4
        completion = len(reply.content or "") // 4 + 10 * len(reply.tool_calls)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _field(request: ReceivedRequest, key: str, default: Any) -> Any:
    value = request.body.get(key, default) if isinstance(request.body, dict) else default
    return value if isinstance(value, type(default)) else default


# ---------------------------------------------------------------------------- the server


class ScriptedModelServer:
    """Answers chat completions from a script; see the module docstring."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host = host
        self._port = port
        self._script: list[ScriptItem] = []
        self._runner: web.AppRunner | None = None
        self._arrived = asyncio.Condition()
        self._released = asyncio.Event()
        self._stopping = asyncio.Event()
        self.default: Reply | None = None
        self.requests: list[ReceivedRequest] = []
        self.unscripted = 0
        self.models: list[str] = ["scripted-model"]

    # lifecycle -------------------------------------------------------------------------

    async def start(self) -> ScriptedModelServer:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        self._port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> ScriptedModelServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        """The OpenAI-style base URL, e.g. ``http://127.0.0.1:41234/v1``."""
        return f"http://{self._host}:{self._port}/v1"

    @property
    def port(self) -> int:
        return self._port

    # scripting -------------------------------------------------------------------------

    def script(self, *items: ScriptItem) -> ScriptedModelServer:
        """Append replies; each request takes the next one."""
        self._script.extend(items)
        return self

    @property
    def pending(self) -> int:
        """Scripted replies not used yet."""
        return len(self._script)

    def release(self) -> None:
        """Let every reply held on the server's own event go on (now and from now on)."""
        self._released.set()

    async def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[ReceivedRequest]:
        """The first ``count`` requests, once they arrived; ``TimeoutError`` if they don't."""
        async with self._arrived:
            try:
                await asyncio.wait_for(
                    self._arrived.wait_for(lambda: len(self.requests) >= count), timeout
                )
            except TimeoutError:
                raise TimeoutError(
                    f"model server got {len(self.requests)} of {count} requests in {timeout}s"
                ) from None
        return self.requests[:count]

    # handlers --------------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        data = [{"id": name, "object": "model", "owned_by": "scripted"} for name in self.models]
        return web.json_response({"object": "list", "data": data})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        received = await self._record(request)
        try:
            reply = self._next(received)
            await self._wait_before(reply)
            if received.stream and reply.status < 400 and reply.body is None:
                return await self._send_stream(request, reply, received)
            return self._send_whole(reply, received)
        except asyncio.CancelledError:
            received.closed_at = time.monotonic()
            received.closed.set()
            raise

    async def _record(self, request: web.Request) -> ReceivedRequest:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        received = ReceivedRequest(
            len(self.requests), request.path, dict(request.headers), raw, body, time.monotonic()
        )
        async with self._arrived:
            self.requests.append(received)
            self._arrived.notify_all()
        return received

    def _next(self, received: ReceivedRequest) -> Reply:
        if received.body is None:
            return reply_error(400, "request body is not JSON", type="invalid_request_error")
        if self._script:
            item = self._script.pop(0)
            return item(received) if callable(item) else item
        if self.default is not None:
            return self.default
        self.unscripted += 1
        _log.error("scripted model server: no reply scripted for request #%d", received.index)
        return reply_error(500, f"no reply scripted for request #{received.index}")

    async def _wait_before(self, reply: Reply) -> None:
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.hold:
            await self._hold(reply)

    async def _hold(self, reply: Reply) -> None:
        gate = reply.until or self._released
        waits = {asyncio.ensure_future(gate.wait()), asyncio.ensure_future(self._stopping.wait())}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()

    def _send_whole(self, reply: Reply, received: ReceivedRequest) -> web.Response:
        headers = dict(reply.headers)
        if reply.body is not None:
            return web.Response(
                status=reply.status,
                body=reply.body,
                content_type=reply.content_type,
                headers=headers,
            )
        payload = completion_json(reply, received, received.index)
        return web.json_response(payload, status=reply.status, headers=headers)

    async def _send_stream(
        self, request: web.Request, reply: Reply, received: ReceivedRequest
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=reply.status, headers=dict(reply.headers))
        response.content_type = "text/event-stream"
        response.headers["Cache-Control"] = "no-cache"
        await response.prepare(request)
        for number, event in enumerate(stream_events(reply, received, received.index)):
            if number == reply.stall_after:
                await self._hold(reply)
            if number == reply.abort_after and request.transport is not None:
                request.transport.abort()  # drop the connection mid-body, like a crash
                return response
            await response.write(f"data: {event}\n\n".encode())
        if reply.done_marker:
            await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response
