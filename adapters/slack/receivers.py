"""How envelopes reach the bolt app: Socket Mode (with a watchdog) or signed HTTP.

Socket Mode: slack-sdk's aiohttp ``SocketModeClient`` (through bolt's handler) is started
with ``connect_async`` — never ``start_async``, which would own the loop. The client
reconnects by itself on a ``disconnect`` envelope and when pongs stop for four ping
intervals; the watchdog covers what that misses (a connection left closed, a monitor that
died, a socket that neither delivers nor answers pings — the "deaf after a reconnect"
reports): every quarter of ``watchdog_seconds`` it checks when the connection was last
heard from (any frame, or a pong) and, past ``watchdog_seconds`` or when it is not
connected, replaces it with a new one (``connect_to_new_endpoint(force=True)``).

Socket Mode health (``receiver.health``, docs/architecture.md §10): every new
``apps.connections.open`` (the SDK's ``issue_new_wss_url``, replaced here) after the first
makes it ``retrying`` until the new socket's ``hello`` makes it ``up``; after a failed open
the next waits the backoff (exponential, full jitter, on the injected sleep). A token Slack
refuses for good (:data:`AUTH_REFUSED`) makes it ``down`` with the fix, logged once, and
closes the client (the SDK's own loop would otherwise retry it forever); the watchdog then
leaves it alone.

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
from slack_sdk.errors import SlackApiError

from adapters.health import Backoff, HealthCell, Sleep
from adapters.inbox import preview
from adapters.slack.errors import error_code
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


AUTH_REFUSED = frozenset(
    {"invalid_auth", "not_authed", "not_allowed_token_type", "account_inactive", "token_revoked"}
)
"""Slack's answers to a token that retrying cannot fix."""
TOKEN_KEYS = {"auth.test": "bot_token", "apps.connections.open": "app_token"}


def auth_refused(exc: BaseException, method: str) -> str | None:
    """The reason and the fix when Slack refused ``method``'s token for good, else None."""
    code = error_code(exc) if isinstance(exc, SlackApiError) else ""
    if code not in AUTH_REFUSED:
        return None
    key = TOKEN_KEYS.get(method, "bot_token")
    return (
        f"Slack refused the {key.replace('_', ' ')} on {method} ({code}): set [slack] {key} "
        f"(or COMMONOS_SLACK_{key.upper()}) to a valid token of this app (bot token xoxb-, "
        "app-level token xapp- with connections:write) and restart the gateway"
    )


SDK_LOG = logging.getLogger("slack_sdk.socket_mode.aiohttp")
"""The Socket Mode client's logger."""


class QuietWhenDown(logging.Filter):
    """Drops the Socket Mode client's records while the connection is down for good: the
    client then only repeats, at ERROR, that it is closed; the one ERROR is the health's."""

    def __init__(self, health: HealthCell) -> None:
        super().__init__()
        self.health = health

    def filter(self, record: logging.LogRecord) -> bool:
        return self.health.value.state != "down"


class SocketReceiver:
    """Socket Mode with its watchdog and its health (see the module docstring)."""

    def __init__(
        self,
        app: AsyncApp,
        app_token: str,
        watchdog_seconds: float,
        ping_interval: float = 5.0,
        *,
        health: HealthCell | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        backoff: Backoff | None = None,
    ) -> None:
        """``clock``: monotonic seconds, for the watchdog's silence; ``sleep``: how a
        reconnection waits out the backoff after a failed ``apps.connections.open``."""
        self.url: str | None = None
        self.handler = AsyncSocketModeHandler(
            app, app_token=app_token, ping_interval=ping_interval, logger=SDK_LOG
        )
        self.client = self.handler.client
        self.client.message_listeners.append(self._heard)
        # every (re)connection asks for a new URL through this one method
        self.client.issue_new_wss_url = self._open_connection  # type: ignore[method-assign]
        self.health = health or HealthCell("slack")
        self._quiet = QuietWhenDown(self.health)
        self.watchdog_seconds = watchdog_seconds
        self.replaced = 0
        """Connections the watchdog replaced (for logs and tests)."""
        self.opened = 0
        """Connections asked for (``apps.connections.open`` answered), this run."""
        self._clock = clock
        self.sleep = sleep
        """How a reconnection waits out the backoff (tests inject one)."""
        self._backoff = backoff or Backoff()
        self._failed = False
        self._why = "the Socket Mode connection closed"
        self._last_heard = clock()
        self._tasks = TaskSet(_log)

    async def start(self) -> None:
        SDK_LOG.addFilter(self._quiet)
        await self.handler.connect_async()  # type: ignore[no-untyped-call]
        self._last_heard = self._clock()
        if self.health.value.state == "starting" and await self.client.is_connected():
            self.health.up()
        self._tasks.spawn(self._watch(), name="slack-socket-watchdog")

    async def stop(self) -> None:
        await self._tasks.aclose()
        await self.handler.close_async()  # type: ignore[no-untyped-call]
        SDK_LOG.removeFilter(self._quiet)
        self.health.stopped()

    async def _open_connection(self) -> str:
        """``apps.connections.open``: the URL of a new socket (the SDK's
        ``issue_new_wss_url``). Marks a reconnection ``retrying``, waits the backoff after
        a failure, and gives up for good on a refused token."""
        if self.opened:
            self.health.retrying(f"{self._why}; reconnecting")
        if self._failed:
            await self.sleep(self._backoff.next())
        web_client = self.client.web_client
        try:
            response = await web_client.apps_connections_open(app_token=self.client.app_token)
        except Exception as exc:
            self._open_failed(exc)
            raise
        self._failed = False
        self.opened += 1
        return str(response["url"])

    def _open_failed(self, exc: Exception) -> None:
        fix = auth_refused(exc, "apps.connections.open")
        if fix is None:
            self._failed = True
            self.health.retrying(f"apps.connections.open failed: {preview(exc)}")
            return
        self.health.down(fix)
        # the SDK's connect() retries every error until the client is closed
        self.client.auto_reconnect_enabled = False
        self.client.closed = True

    async def _heard(self, _client: Any, message: dict[str, Any], *_: Any) -> None:
        self._last_heard = self._clock()
        if message.get("type") == "hello" and self.health.value.state not in ("up", "down"):
            self._backoff.reset()
            self._why = "the Socket Mode connection closed"
            self.health.up()

    def silent_for(self) -> float:
        """Seconds since the connection last delivered a frame or answered a ping."""
        pong = self.client.last_ping_pong_time  # wall-clock seconds, set by the SDK
        heard = self._last_heard
        now = self._clock()
        if pong is not None:
            heard = max(heard, now - (time.time() - float(pong)))
        return now - heard

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.watchdog_seconds / 4)  # a period, not a backoff
            try:
                await self.check()
            except Exception:
                _log.exception("slack: the Socket Mode watchdog could not reconnect")

    async def check(self) -> bool:
        """Replace the connection if it is closed or silent too long; True if replaced
        (never once the token was refused: the connection is down for good)."""
        if self.health.value.state == "down":
            return False
        silent = self.silent_for()
        connected = await self.client.is_connected()
        if connected and silent < self.watchdog_seconds:
            return False
        why = f"silent for {silent:.0f}s" if connected else "not connected"
        _log.warning("slack: Socket Mode connection %s; opening a new one", why)
        self._why = f"the Socket Mode connection was {why}"
        await self.client.connect_to_new_endpoint(force=True)
        self._last_heard = self._clock()
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
        app.error(_remember_failure)
        app.logger.addFilter(_unhandled_without_body)

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
        """Bolt's answer. An error raised inside bolt alone (its middleware or listener
        matchers, on a payload of a shape they do not expect) is the request's fault: 400.
        One raised in our listeners (the store is out) stays bolt's 500, so Slack retries."""
        try:
            response = await self.app.async_dispatch(request)
        except Exception as exc:
            raise Refused(400, f"not a Slack payload ({type(exc).__name__})") from None
        failure = request.context.get(FAILURE)
        if response.status >= 500 and isinstance(failure, Exception):
            if raised_in_bolt(failure):
                raise Refused(400, f"not a Slack payload ({type(failure).__name__})")
            _log.error("slack: handling a request failed", exc_info=failure)
        return response


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


FAILURE = "commonos_failure"
"""Where :func:`_remember_failure` keeps the error on the request's context."""
OUR_PACKAGES = frozenset({"adapters", "core", "gateway"})


async def _remember_failure(error: Exception, request: AsyncBoltRequest) -> None:
    """Bolt's error handler (middleware and listeners): keep the error for
    :meth:`HttpReceiver._dispatch`, which logs it or answers 400."""
    request.context[FAILURE] = error


def _unhandled_without_body(record: logging.LogRecord) -> bool:
    """Bolt's "Unhandled request" warning (its 404) quotes the whole payload, user text
    and all: it is kept, shortened to a line that quotes nothing."""
    if str(record.msg).startswith("Unhandled request"):
        record.msg, record.args = "slack: no listener for this request; answered 404", None
    return True


def raised_in_bolt(error: BaseException) -> bool:
    """True when no frame between where bolt caught ``error`` and where it was raised is
    our code: bolt could not take the payload apart; our listeners never ran into it."""
    trace = error.__traceback__
    while trace is not None:
        module = str(trace.tb_frame.f_globals.get("__name__", ""))
        if module.partition(".")[0] in OUR_PACKAGES:
            return False
        trace = trace.tb_next
    return True


def is_ssl_check(body: str) -> bool:
    """Slack's ``ssl_check=1`` probe (a form), which bolt answers unverified."""
    return not body.startswith("{") and ("ssl_check", "1") in parse_qsl(body)
