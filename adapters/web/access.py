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
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp import web

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


class AccessGate:
    """The rules above for one server; :meth:`middleware` enforces them."""

    def __init__(self, token: str | None) -> None:
        self.token = token or None
        self._cookie = session_value(self.token) if self.token else None

    def token_matches(self, offered: str) -> bool:
        return self.token is not None and hmac.compare_digest(offered.encode(), self.token.encode())

    def authorized(self, request: web.Request) -> bool:
        if self.token is None:
            return True
        cookie = request.cookies.get(COOKIE, "")
        if self._cookie is not None and hmac.compare_digest(cookie.encode(), self._cookie.encode()):
            return True
        scheme, _, offered = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and self.token_matches(offered.strip())

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
        if request.path in OPEN_PATHS or self.authorized(request):
            return None
        return unauthorized(request)


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


def unauthorized(request: web.Request) -> web.StreamResponse:
    """401: a browser asking for a page gets the login form with it."""
    if request.method == "GET" and "text/html" in request.headers.get("Accept", ""):
        return login_page(status=401)
    return web.json_response({"error": "unauthorized: log in with the [web] token"}, status=401)


def login_page(*, status: int = 200, failed: bool = False) -> web.Response:
    note = '<p class="error">Wrong token.</p>' if failed else ""
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
