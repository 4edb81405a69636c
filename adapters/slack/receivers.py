"""How envelopes reach the bolt app: Socket Mode (with a watchdog) or signed HTTP.

Socket Mode: slack-sdk's aiohttp ``SocketModeClient`` (through bolt's handler) is started
with ``connect_async`` — never ``start_async``, which would own the loop. The client
reconnects by itself on a ``disconnect`` envelope and when pongs stop for four ping
intervals; the watchdog covers what that misses (a connection left closed, a monitor that
died, a socket that neither delivers nor answers pings — the "deaf after a reconnect"
reports): every quarter of ``watchdog_seconds`` it checks when the connection was last
heard from (any frame, or a pong) and, past ``watchdog_seconds`` or when it is not
connected, replaces it with a new one (``connect_to_new_endpoint(force=True)``).

HTTP: an aiohttp server on ``host:port`` whose one route, ``POST path``, checks each request
at our edge before bolt's ``async_dispatch`` sees it (:class:`HttpReceiver`): a body over
:data:`MAX_BODY` is 413, a missing, non-numeric or stale (over five minutes)
``X-Slack-Request-Timestamp`` or a bad ``X-Slack-Signature`` is 401, and a signed body
that is not a Slack payload (not UTF-8, not JSON, JSON that is not an object, a form whose
``payload`` is not a JSON object, an ``event`` without a string ``type``, or one bolt
cannot take apart) is 400 — never a 5xx. Slack retries every answer outside 2xx unless it
carries ``X-Slack-No-Retry: 1``, so every refusal (and bolt's own 4xx) carries it: a
retry cannot help. Each refusal is a short JSON body and one WARNING naming the reason,
never the payload's text. A 5xx is left only for a listener that raised (the store is
out): Slack retries it, and storage may be back by then. Slack's retries
(``X-Slack-Retry-Num``) are answered like first deliveries — the inbox makes them harmless.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from urllib.parse import parse_qsl

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

from core.tasks import TaskSet

_log = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024
"""Bytes one HTTP request may carry (Slack's payloads are a few KB; aiohttp's default)."""
STALE_SECONDS = 300
"""A request timestamp further than this from our clock is refused (Slack's five minutes)."""
TIMESTAMP = re.compile(r"[0-9]{1,12}")
SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")
NO_RETRY = {"X-Slack-No-Retry": "1"}
"""Slack retries every answer outside 2xx (``http_error``) unless told not to."""
WallClock = Callable[[], float]
"""Seconds since the epoch (``time.time``; a test's clock)."""


class Receiver(Protocol):
    url: str | None

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class SocketReceiver:
    def __init__(
        self, app: AsyncApp, app_token: str, watchdog_seconds: float, ping_interval: float = 5.0
    ) -> None:
        self.url: str | None = None
        self.handler = AsyncSocketModeHandler(app, app_token=app_token, ping_interval=ping_interval)
        self.client = self.handler.client
        self.client.message_listeners.append(self._heard)
        self.watchdog_seconds = watchdog_seconds
        self.replaced = 0
        """Connections the watchdog replaced (for logs and tests)."""
        self._last_heard = time.monotonic()
        self._tasks = TaskSet(_log)

    async def start(self) -> None:
        await self.handler.connect_async()  # type: ignore[no-untyped-call]
        self._last_heard = time.monotonic()
        self._tasks.spawn(self._watch(), name="slack-socket-watchdog")

    async def stop(self) -> None:
        await self._tasks.aclose()
        await self.handler.close_async()  # type: ignore[no-untyped-call]

    async def _heard(self, *_: Any) -> None:
        self._last_heard = time.monotonic()

    def silent_for(self) -> float:
        """Seconds since the connection last delivered a frame or answered a ping."""
        pong = self.client.last_ping_pong_time
        heard = self._last_heard
        if pong is not None:
            heard = max(heard, time.monotonic() - (time.time() - float(pong)))
        return time.monotonic() - heard

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.watchdog_seconds / 4)
            try:
                await self.check()
            except Exception:
                _log.exception("slack: the Socket Mode watchdog could not reconnect")

    async def check(self) -> bool:
        """Replace the connection if it is closed or silent too long; True if replaced."""
        silent = self.silent_for()
        connected = await self.client.is_connected()
        if connected and silent < self.watchdog_seconds:
            return False
        why = f"silent for {silent:.0f}s" if connected else "not connected"
        _log.warning("slack: Socket Mode connection %s; opening a new one", why)
        await self.client.connect_to_new_endpoint(force=True)
        self._last_heard = time.monotonic()
        self.replaced += 1
        return True


class HttpReceiver:
    """Signed HTTP delivery: the edge checks of the module docstring, then bolt."""

    def __init__(
        self,
        app: AsyncApp,
        host: str,
        port: int,
        path: str,
        signing_secret: str,
        *,
        clock: WallClock = time.time,
    ) -> None:
        self.app, self.host, self.port, self.path = app, host, port, path
        self.url: str | None = None
        self.signing_secret, self.clock = signing_secret.encode(), clock
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        server = web.Application(client_max_size=MAX_BODY)
        server.router.add_post(self.path, self._handle)
        self._runner = web.AppRunner(server, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        port = self._runner.addresses[0][1]
        self.url = f"http://{self.host}:{port}{self.path}"
        _log.info("slack: events at %s", self.url)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.Response:
        try:
            bolt_request = await self._admit(request)
            response = await self._dispatch(bolt_request)
        except Refused as refusal:
            _log.warning(
                "slack: refused an HTTP request from %s: %d %s",
                request.remote,
                refusal.status,
                refusal.reason,
            )
            return web.json_response(
                {"error": refusal.reason}, status=refusal.status, headers=NO_RETRY
            )
        answer = await to_aiohttp_response(response)
        if 400 <= answer.status < 500:  # bolt's own 4xx (no listener): a retry cannot help
            answer.headers.update(NO_RETRY)
        return answer

    async def _admit(self, request: web.Request) -> AsyncBoltRequest:
        """The request as bolt takes it, once it passed the edge checks (else Refused)."""
        raw = await read_body(request)
        body = raw.decode("utf-8", errors="replace")
        if not is_ssl_check(body):  # bolt answers those before it verifies anything
            check_signature(self.signing_secret, request.headers, raw, self.clock())
            body = utf8(raw)
            check_payload(body, request.content_type)
        try:
            headers: Any = request.headers
            return AsyncBoltRequest(body=body, query=request.query_string, headers=headers)
        except Exception as exc:
            raise Refused(400, f"not a Slack payload ({type(exc).__name__})") from None

    async def _dispatch(self, request: AsyncBoltRequest) -> BoltResponse:
        """Bolt's answer; what escapes bolt (not our listeners: bolt answers their errors
        itself) is bolt failing to take the payload apart — the request's fault."""
        try:
            return await self.app.async_dispatch(request)
        except Exception as exc:
            raise Refused(400, f"not a Slack payload ({type(exc).__name__})") from None


class Refused(Exception):
    """A request answered with a 4xx at the edge; ``reason`` names what was wrong in a few
    words and never repeats the request's content (it is logged)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status} {reason}")
        self.status, self.reason = status, reason


async def read_body(request: web.Request) -> bytes:
    """The body's bytes; 413 past :data:`MAX_BODY`."""
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise Refused(413, f"body larger than {MAX_BODY} bytes") from None


def utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(400, "body is not UTF-8") from None


def check_signature(secret: bytes, headers: Mapping[str, str], body: bytes, now: float) -> None:
    """401 unless the timestamp is a number within five minutes of ``now`` and the
    signature is Slack's v0 HMAC-SHA256 of the raw body (before it is decoded or parsed)."""
    timestamp = headers.get("X-Slack-Request-Timestamp", "")
    if TIMESTAMP.fullmatch(timestamp) is None:
        raise Refused(401, "missing or non-numeric X-Slack-Request-Timestamp")
    if abs(now - int(timestamp)) > STALE_SECONDS:
        raise Refused(401, "stale X-Slack-Request-Timestamp")
    base = b"v0:" + timestamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret, base, hashlib.sha256).hexdigest()
    signature = headers.get("X-Slack-Signature", "")
    if SIGNATURE.fullmatch(signature) is None or not hmac.compare_digest(signature, expected):
        raise Refused(401, "invalid X-Slack-Signature")


def check_payload(body: str, content_type: str) -> None:
    """400 unless ``body`` reads as bolt reads it into a JSON object: JSON, or a form whose
    ``payload`` (interactivity) is JSON; a slash command's plain form always reads."""
    if content_type == "application/json" or body.startswith("{"):
        _json_object(body, "body")
    elif "payload" in body:
        payload = dict(parse_qsl(body, keep_blank_values=True)).get("payload")
        if payload is not None:
            _json_object(payload, "payload")


def _json_object(text: str, what: str) -> None:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise Refused(400, f"{what} is not JSON") from None
    if not isinstance(data, dict):
        raise Refused(400, f"{what} is JSON but not an object")
    event = data.get("event", {"type": ""})
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise Refused(400, f"{what}: event is not an object with a type")


def is_ssl_check(body: str) -> bool:
    """Slack's ``ssl_check=1`` probe (a form), which bolt answers unverified."""
    return not body.startswith("{") and ("ssl_check", "1") in parse_qsl(body)
