"""Who may use the web server, and the headers every answer carries.

Rules (one aiohttp middleware, applied to every route the server has — the chat, the
dashboard, health and metrics alike):

* **Loopback without a token**: no login. The ``Host`` header must name a loopback host,
  so a page on another site cannot reach the server through DNS rebinding.
* **With a token** (required for any non-loopback ``listen``; the config refuses it
  otherwise): every request needs it — either the session cookie set by the login form
  (HttpOnly, SameSite=Strict; its value is an HMAC of the token, never the token) or an
  ``Authorization: Bearer <token>`` header (for probes and scrapers). Comparisons are
  constant-time. Missing or wrong: 401 (a browser asking for a page gets the login form).
* **Failed logins are throttled** (:class:`LoginThrottle`; a wrong token in the login form
  or in an ``Authorization`` header is a failure): after 5 failures within 60 s from one
  client — an IPv4 address, or an IPv6 /64 — it is locked out for 60 s, then 120 s, 240 s…
  up to an hour for each further lockout; a success, or an hour without a failure, forgets
  it. While locked out, every request of it that offers a token gets 429 with
  ``Retry-After`` and the token is not checked. As a backstop, while 50 failures within
  60 s come from all clients together, a client is locked out at its first failure. A
  client that has not failed is always checked, so a login from elsewhere still works,
  and a session cookie (not a guess at the token) is never throttled. Behind a reverse
  proxy every client has the proxy's address: they share one count.
* **Cross-site writes are refused**: a POST whose ``Origin`` is not this server's own
  origin, or that the browser marks ``Sec-Fetch-Site: cross-site``, gets 403. Clients that
  send no ``Origin`` (curl, scripts) are not browsers a page can drive.
* Every answer carries ``Content-Security-Policy: default-src 'self'`` (no inline script,
  no third-party resources), ``X-Content-Type-Options: nosniff``, ``Referrer-Policy:
  no-referrer`` and ``X-Frame-Options: DENY``.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from aiohttp import web

from core.bounded import BoundedMap

COOKIE = "commonos_web"
LOGIN_PATH = "/login"
OPEN_PATHS = frozenset({LOGIN_PATH, "/static/login.css"})
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
LOOPBACK_NAMES = frozenset({"localhost"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Clock = Callable[[], float]


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.1``, ``::1``)."""
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def session_value(token: str) -> str:
    """The cookie value proving a login: derived from the token, never the token itself."""
    return hmac.new(token.encode(), b"commonos-web-session", hashlib.sha256).hexdigest()


@dataclass
class _Client:
    failures: deque[float] = field(default_factory=deque)
    locked_until: float = 0.0
    lockouts: int = 0
    last_failure: float = 0.0


@dataclass(frozen=True, slots=True)
class Attempt:
    """One offered token's fate: accepted, or not; ``retry_after`` > 0: the client is
    locked out and the token was not checked."""

    accepted: bool
    retry_after: int = 0


class LoginThrottle:
    """Failed token checks per client and all together (the numbers in the module
    docstring); ``clock`` is monotonic seconds (tests inject one)."""

    def __init__(
        self,
        clock: Clock = time.monotonic,
        *,
        per_client: int = 5,
        window: float = 60.0,
        first_lockout: float = 60.0,
        max_lockout: float = 3600.0,
        everyone: int = 50,
        clients: int = 10_000,
    ) -> None:
        self.clock, self.per_client, self.window = clock, per_client, window
        self.first_lockout, self.max_lockout = first_lockout, max_lockout
        self._clients: BoundedMap[str, _Client] = BoundedMap(clients)
        self._everyone: deque[float] = deque(maxlen=everyone)

    def retry_after(self, client: str) -> int:
        """Whole seconds until ``client`` may offer a token again (0: it may now)."""
        state = self._clients.get(client)
        wait = 0.0 if state is None else state.locked_until - self.clock()
        return math.ceil(wait) if wait > 0 else 0

    def failed(self, client: str) -> None:
        now = self.clock()
        self._everyone.append(now)
        state = self._clients.get(client) or _Client()
        if now - state.last_failure > self.max_lockout:
            state.lockouts = 0  # an hour of quiet forgets earlier lockouts
        state.last_failure = now
        state.failures.append(now)
        while state.failures and state.failures[0] <= now - self.window:
            state.failures.popleft()
        if len(state.failures) >= (1 if self._under_attack(now) else self.per_client):
            lockout = min(self.first_lockout * 2**state.lockouts, self.max_lockout)
            state.locked_until, state.lockouts = now + lockout, state.lockouts + 1
            state.failures.clear()
        self._clients.put(client, state)

    def succeeded(self, client: str) -> None:
        self._clients.pop(client, None)

    def _under_attack(self, now: float) -> bool:
        full = len(self._everyone) == self._everyone.maxlen
        return full and self._everyone[0] > now - self.window


def client_of(request: web.Request) -> str:
    """Who a request counts as for the throttle: its address, an IPv6 address's /64."""
    remote = request.remote or "unknown"
    try:
        address = ipaddress.ip_address(remote)
    except ValueError:
        return remote
    if address.version == 6:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


class AccessGate:
    """The rules above for one server; :meth:`middleware` enforces them."""

    def __init__(self, token: str | None, throttle: LoginThrottle | None = None) -> None:
        self.token = token or None
        self._cookie = session_value(self.token) if self.token else None
        self.throttle = throttle or LoginThrottle()

    def token_matches(self, offered: str) -> bool:
        return self.token is not None and hmac.compare_digest(offered.encode(), self.token.encode())

    def attempt(self, request: web.Request, offered: str) -> Attempt:
        """Check a token offered by ``request``'s client, under the throttle."""
        client = client_of(request)
        wait = self.throttle.retry_after(client)
        if wait:
            return Attempt(False, wait)
        if self.token_matches(offered):
            self.throttle.succeeded(client)
            return Attempt(True)
        self.throttle.failed(client)
        return Attempt(False)

    def has_session(self, request: web.Request) -> bool:
        cookie = request.cookies.get(COOKIE, "")
        return self._cookie is not None and hmac.compare_digest(
            cookie.encode(), self._cookie.encode()
        )

    def log_in(self, response: web.StreamResponse, request: web.Request) -> None:
        assert self._cookie is not None
        response.set_cookie(
            COOKIE, self._cookie, httponly=True, samesite="Strict", secure=request.secure, path="/"
        )

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        refusal = self._refusal(request)
        try:
            response = refusal if refusal is not None else await handler(request)
        except web.HTTPException as exc:  # 404, 405, redirects: raised, still with headers
            _secure(exc)
            raise
        return _secure(response)

    def _refusal(self, request: web.Request) -> web.StreamResponse | None:
        if self.token is None and not is_loopback(request.url.host or ""):
            return web.Response(status=403, text="forbidden: not a loopback host name\n")
        if request.method not in ("GET", "HEAD", "OPTIONS") and cross_site(request):
            return web.json_response({"error": "cross-origin request refused"}, status=403)
        if request.path in OPEN_PATHS or self.token is None or self.has_session(request):
            return None
        offered = bearer_token(request)
        if offered is None:
            return unauthorized(request)
        attempt = self.attempt(request, offered)
        if attempt.retry_after:
            return locked_out(request, attempt.retry_after)
        return None if attempt.accepted else unauthorized(request)


def _secure(response: web.StreamResponse) -> web.StreamResponse:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


def cross_site(request: web.Request) -> bool:
    """True when a browser says this write comes from another origin."""
    if request.headers.get("Sec-Fetch-Site", "") == "cross-site":
        return True
    origin = request.headers.get("Origin")
    if origin is None:
        return False
    parts = urlsplit(origin)
    own = request.url
    return (parts.scheme, parts.netloc) != (own.scheme, own.raw_authority)


def bearer_token(request: web.Request) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (None: no such header)."""
    scheme, _, offered = request.headers.get("Authorization", "").partition(" ")
    return offered.strip() if scheme.lower() == "bearer" else None


def locked_out(request: web.Request, retry_after: int) -> web.StreamResponse:
    """429 with ``Retry-After``: the login form for a browser's form post, else JSON."""
    headers = {"Retry-After": str(retry_after)}
    if request.path == LOGIN_PATH and request.method == "POST":
        page = login_page(status=429, locked=retry_after)
        page.headers.update(headers)
        return page
    error = f"too many failed logins from your address; retry after {retry_after} s"
    return web.json_response({"error": error}, status=429, headers=headers)


def unauthorized(request: web.Request) -> web.StreamResponse:
    """401: a browser asking for a page gets the login form with it."""
    if request.method == "GET" and "text/html" in request.headers.get("Accept", ""):
        return login_page(status=401)
    return web.json_response({"error": "unauthorized: log in with the [web] token"}, status=401)


def login_page(*, status: int = 200, failed: bool = False, locked: int = 0) -> web.Response:
    note = '<p class="error">Wrong token.</p>' if failed else ""
    if locked:
        note = f'<p class="error">Too many failed logins; try again in {locked} s.</p>'
    body = LOGIN_FORM.format(note=note)
    return web.Response(status=status, text=body, content_type="text/html")


LOGIN_FORM = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>CommonOS — log in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/static/login.css"></head>
<body><form method="post" action="/login"><h1>CommonOS</h1>{note}
<label>Token <input type="password" name="token" autocomplete="current-password" autofocus
required></label><button type="submit">Log in</button></form></body></html>
"""
