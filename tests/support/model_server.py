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
connection), ``headers={...}``, ``usage=(prompt, completion)``; for timing (the block
"paced streams" at the end): ``gap=0.05`` (streaming: seconds between events),
``ping_every=0.05`` (streaming: a ``:`` keep-alive comment this often while it waits,
in a gap or a stall, as llama-server does every 30 s).

A script item may also be a function ``(ReceivedRequest) -> Reply`` to answer from the
request. When the script is used up, ``server.default`` answers (e.g. for a benchmark:
``server.default = reply_text("ok")``); if that is ``None`` the request gets HTTP 500 naming
the problem and ``server.unscripted`` counts it.

The pieces live in ``tests.support.model_replies`` (``Reply``, ``reply_*``,
``ReceivedRequest``) and ``tests.support.model_wire`` (the JSON/SSE shapes); this module
re-exports the former, so ``from tests.support.model_server import ...`` is enough.

Strict mode (``server.strict = True``, the block at the end of this module): a request a
strict server rejects — a tool call whose arguments are not JSON (llama.cpp's HTTP 500 with
its exact body), a tool result without its call, an assistant message with no content and
no tool calls (OpenAI's HTTP 400) — is answered with that error, uses up no scripted reply,
and is kept in ``server.rejected``.

Server-side checks (llama.cpp's context size and chat templates, ``tests.support.llamacpp``):
``server.count_tokens`` (``(ReceivedRequest) -> int``) counts each request's prompt as the
server's tokenizer would (``ReceivedRequest.prompt_tokens``, and the reply's
``usage.prompt_tokens``); each of ``server.checks`` (``(ReceivedRequest) -> Reply | None``)
may refuse a request with the server's error, which, as in strict mode, uses up no scripted
reply and is kept in ``server.rejected``.

Cache reuse (the block "prompt cache reuse" at the end): with
``server.report_cache_reuse = True`` the server measures, for every request, how many
leading bytes of its prompt equal the previous request's — like llama-server's
``timings.cache_n`` — in ``server.cache_reuse`` (one figure per request, 0 for the first),
and a non-streamed reply carries it as ``"timings": {"cache_n": n, "prompt_n": rest}``. The
prompt is rendered in a chat template's order: the system text, *then* the tools block,
then the other messages (Qwen/Hermes-style templates put the tools after the system text),
so a byte that changes in the system message costs the tools and the whole history.

Waiting is event-driven: ``await server.wait_for_requests(n)`` returns once ``n`` requests
arrived; each ``ReceivedRequest.closed`` is an ``asyncio.Event`` set when the client went
away before the reply was complete (``closed_at`` is its ``time.monotonic()``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from tests.support.model_replies import (
    Json,
    ReceivedRequest,
    Reply,
    ScriptItem,
    ToolCallScript,
    reply_error,
    reply_hang,
    reply_json,
    reply_rate_limited,
    reply_raw,
    reply_sse,
    reply_text,
    reply_tool_call,
    reply_tool_calls,
)
from tests.support.model_wire import completion_json, stream_events

__all__ = [
    "Json",
    "ReceivedRequest",
    "Reply",
    "ScriptItem",
    "ScriptedModelServer",
    "ToolCallScript",
    "reply_error",
    "reply_hang",
    "reply_json",
    "reply_rate_limited",
    "reply_raw",
    "reply_sse",
    "reply_text",
    "reply_tool_call",
    "reply_tool_calls",
]

_log = logging.getLogger(__name__)


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
        self.report_cache_reuse = False
        self.cache_reuse: list[int] = []
        self.strict = False
        """Reject what a strict server rejects before any reply is taken (see below)."""
        self.rejected: list[ReceivedRequest] = []
        self.count_tokens: Callable[[ReceivedRequest], int] | None = None
        self.checks: list[Callable[[ReceivedRequest], Reply | None]] = []

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
        if self.count_tokens is not None and body is not None:
            received.prompt_tokens = self.count_tokens(received)
        if self.report_cache_reuse:
            self.cache_reuse.append(cache_reuse(self.requests[-1:], received))
        async with self._arrived:
            self.requests.append(received)
            self._arrived.notify_all()
        return received

    def _next(self, received: ReceivedRequest) -> Reply:
        if received.body is None:
            return reply_error(400, "request body is not JSON", type="invalid_request_error")
        rejection = strict_rejection(received.messages) if self.strict else None
        for check in self.checks:
            rejection = rejection or check(received)
        if rejection is not None:
            self.rejected.append(received)
            return rejection
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
            await asyncio.gather(*waits, return_exceptions=True)

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
        if self.report_cache_reuse and isinstance(payload, dict):
            payload["timings"] = cache_timings(self.cache_reuse[received.index], received)
        return web.json_response(payload, status=reply.status, headers=headers)

    async def _send_stream(
        self, request: web.Request, reply: Reply, received: ReceivedRequest
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=reply.status, headers=dict(reply.headers))
        response.content_type = "text/event-stream"
        response.headers["Cache-Control"] = "no-cache"
        await response.prepare(request)
        for number, event in enumerate(stream_events(reply, received, received.index)):
            if number and reply.gap:
                await _pinging(response, reply, asyncio.sleep(reply.gap))
            if number == reply.stall_after:
                await _pinging(response, reply, self._hold(reply))
            if number == reply.abort_after and request.transport is not None:
                request.transport.abort()  # drop the connection mid-body, like a crash
                return response
            await response.write(f"data: {event}\n\n".encode())
        if reply.done_marker:
            await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


# strict mode ---------------------------------------------------------------------------
#
# ``server.strict = True`` answers as llama.cpp's ``llama-server --jinja`` does a request
# whose history holds a tool call with arguments that are not JSON: HTTP 500 with its exact
# body (recorded; docs: /work/shared/research/real-model-servers.md, I1) — and as OpenAI
# does a tool result without its call or an assistant message with no content and no tool
# calls (HTTP 400). The script is not used up by a rejected request; ``server.rejected``
# keeps them.

LLAMA_ARGUMENTS_ERROR = "Failed to parse tool call arguments as JSON: "
LLAMA_PARSE_ERRORS = {
    "{": "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error while "
    "parsing object key - unexpected end of input; expected string literal",
    "": "[json.exception.parse_error.101] parse error at line 1, column 1: attempting to parse "
    "an empty input; check that your input string or stream contains the expected JSON",
}
OPENAI_ORPHAN_TOOL = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
    "with 'tool_calls'."
)
OPENAI_NULL_CONTENT = "Invalid value for 'content': expected a string, got null."


def strict_rejection(messages: list[Json]) -> Reply | None:
    """The strict server's error for ``messages``, or ``None`` when it accepts them."""
    calls: set[str] = set()
    for message in messages:
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in calls:
                return reply_error(400, OPENAI_ORPHAN_TOOL, type="invalid_request_error")
            continue
        calls = set()
        for call in message.get("tool_calls") or ():
            calls.add(call.get("id"))
            problem = _arguments_problem(call.get("function", {}).get("arguments"))
            if problem is not None:
                error = {"code": 500, "message": LLAMA_ARGUMENTS_ERROR + problem}
                return reply_json({"error": {**error, "type": "server_error"}}, status=500)
        if message.get("role") == "assistant" and not calls and not message.get("content"):
            return reply_error(400, OPENAI_NULL_CONTENT, type="invalid_request_error")
    return None


def _arguments_problem(arguments: object) -> str | None:
    """What nlohmann::json (llama.cpp's parser) says of ``arguments``; ``None`` if JSON."""
    if not isinstance(arguments, str):
        return "[json.exception.type_error.302] type must be string"
    try:
        json.loads(arguments, parse_constant=_no_constant)
    except ValueError as error:
        known = LLAMA_PARSE_ERRORS.get(arguments)
        return known or f"[json.exception.parse_error.101] parse error: {error}"
    return None


def _no_constant(name: str) -> object:
    raise ValueError(f"syntax error while parsing value - invalid literal {name}")


# paced streams -------------------------------------------------------------------------
#
# ``gap`` spaces a stream's events out (a slow model that keeps producing); ``ping_every``
# writes llama-server's ``:`` keep-alive comment while the stream waits (a gap or a stall).


async def _pinging(response: web.StreamResponse, reply: Reply, wait: Awaitable[None]) -> None:
    """Await ``wait``, writing a keep-alive comment every ``reply.ping_every`` seconds."""
    if reply.ping_every is None:
        await wait
        return
    waiting = asyncio.ensure_future(wait)
    try:
        while not waiting.done():
            await asyncio.wait({waiting}, timeout=reply.ping_every)
            if not waiting.done():
                await response.write(b":\n\n")
    finally:
        waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)


# prompt cache reuse --------------------------------------------------------------------
#
# What a prompt-caching server (llama-server's ``cache_n``, a provider's cached input
# tokens) could reuse: the leading bytes a request's prompt shares with the previous one.


def prompt_bytes(request: ReceivedRequest) -> bytes:
    """The request as a chat template lays it out: model, system text, tools, the rest."""
    messages = request.wire_messages
    head = messages[:1] if messages and messages[0].get("role") == "system" else []
    parts: list[object] = [request.model, *head, request.tools, *messages[len(head) :]]
    return b"".join(json.dumps(part, ensure_ascii=False).encode() + b"\n" for part in parts)


def cache_reuse(previous: list[ReceivedRequest], current: ReceivedRequest) -> int:
    """Leading bytes of ``current``'s prompt equal to the previous request's (0: none)."""
    if not previous:
        return 0
    before, now = prompt_bytes(previous[0]), prompt_bytes(current)
    same = 0
    for old, new in zip(before, now, strict=False):
        if old != new:
            break
        same += 1
    return same


def cache_timings(reused: int, request: ReceivedRequest) -> dict[str, int]:
    """llama-server-style ``timings``, counted in bytes: reused and freshly processed."""
    return {"cache_n": reused, "prompt_n": len(prompt_bytes(request)) - reused}
