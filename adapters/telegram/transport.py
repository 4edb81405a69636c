"""The Bot API transport: python-telegram-bot's ``BaseRequest`` over one aiohttp session.

PTB's default ``HTTPXRequest`` costs about 1.1–1.3 ms of CPU per ``sendMessage`` on
loopback (httpx + httpcore + anyio + h11, and a scan of every pooled connection per
request); this transport about 0.6–0.75 ms (``make bench ARGS=transport`` measures both).
Every message a bot receives and answers makes at least two calls (``getUpdates`` and
``sendMessage``), and under load the pool scan grows with the connections in use.

Same contract as ``HTTPXRequest``: form-encoded parameters (multipart when a file is
sent), the read, connect and pool timeouts PTB passes per call (or the defaults given here),
proxies from the environment (``HTTPS_PROXY``, ``NO_PROXY``, …), and foreign errors
translated at the edge — a timeout (connecting, waiting for a pooled connection, reading)
is ``TimedOut``, any other client error ``NetworkError``. A POST is never retried by this
layer (aiohttp retries only idempotent methods), so a call reaches Telegram at most once
per ``do_request``.

What a call needs besides its form is looked up, not built, after the first call of its
kind: the aiohttp timeout per combination of PTB's timeouts, the environment's proxy per
URL (one per Bot API method).
"""

from __future__ import annotations

from typing import Any

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import ODVInput
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData
from yarl import URL

DEFAULT_TIMEOUT = 5.0
POOL_TIMEOUT = 1.0
Proxy = tuple[URL | None, aiohttp.BasicAuth | None]
Timeouts = tuple[ODVInput[float], ODVInput[float], ODVInput[float]]
"""PTB's read, connect and pool timeouts of one call (a ``DefaultValue``: ours)."""


class AiohttpRequest(BaseRequest):
    """A PTB request backend on :class:`aiohttp.ClientSession` (created in ``initialize``)."""

    def __init__(
        self,
        connection_pool_size: int = 64,
        *,
        read_timeout: float | None = DEFAULT_TIMEOUT,
        connect_timeout: float | None = DEFAULT_TIMEOUT,
        pool_timeout: float | None = POOL_TIMEOUT,
    ) -> None:
        self._pool_size = connection_pool_size
        self._read, self._connect, self._pool = read_timeout, connect_timeout, pool_timeout
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[tuple[str, str | None], Proxy] = {}
        self._url_proxies: dict[str, Proxy] = {}
        self._timeouts: dict[Timeouts, aiohttp.ClientTimeout] = {}

    @property
    def read_timeout(self) -> float | None:
        return self._read

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._pool_size)
            self._session = aiohttp.ClientSession(connector=connector)

    async def shutdown(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        session = self._session
        if session is None or session.closed:
            raise RuntimeError("This AiohttpRequest is not initialized!")
        files = request_data.multipart_data if request_data else None
        timeouts = (read_timeout, connect_timeout, pool_timeout)
        timeout = self._timeouts.get(timeouts) or self._timeout(*timeouts)
        fields = request_data.json_parameters if request_data is not None else None
        body = _multipart(fields or {}, files) if files else fields
        headers = {"User-Agent": self.USER_AGENT}
        proxy, proxy_auth = self._url_proxies.get(url) or self._proxy_for(url)
        try:
            async with session.request(
                method, url, data=body, headers=headers, timeout=timeout,
                proxy=proxy, proxy_auth=proxy_auth,
            ) as response:  # fmt: skip
                return response.status, await response.read()
        except TimeoutError as err:
            raise TimedOut from err
        except aiohttp.ClientError as err:
            raise NetworkError(f"aiohttp.{err.__class__.__name__}: {err}") from err

    def _proxy_for(self, url: str) -> Proxy:
        """The environment's proxy for ``url``'s scheme and host, looked up once per pair
        (aiohttp's ``trust_env`` would read the environment and ``~/.netrc`` in a worker
        thread on every call)."""
        target = URL(url)
        key = (target.scheme, target.host)
        if key not in self._proxies:
            try:
                self._proxies[key] = get_env_proxy_for_url(target)
            except LookupError:
                self._proxies[key] = (None, None)
        self._url_proxies[url] = self._proxies[key]
        return self._proxies[key]

    def _timeout(
        self, read: ODVInput[float], connect: ODVInput[float], pool: ODVInput[float]
    ) -> aiohttp.ClientTimeout:
        """PTB's timeouts in aiohttp's terms: waiting for a pooled connection and connecting
        together bound ``connect``; ``read`` bounds each wait for the answer's bytes. PTB's
        write timeout has no aiohttp counterpart (the bot sends short forms; no files)."""
        read_s = self._read if isinstance(read, DefaultValue) else read
        connect_s = self._connect if isinstance(connect, DefaultValue) else connect
        pool_s = self._pool if isinstance(pool, DefaultValue) else pool
        timeout = aiohttp.ClientTimeout(
            total=None, connect=_sum(connect_s, pool_s), sock_connect=connect_s, sock_read=read_s
        )
        self._timeouts[(read, connect, pool)] = timeout
        return timeout


def _multipart(fields: dict[str, Any], files: dict[str, Any]) -> aiohttp.FormData:
    """The form fields and the files that go along (PTB's ``(name, bytes, mime type)``
    triples) as one multipart form."""
    form = aiohttp.FormData()
    for name, value in fields.items():
        form.add_field(name, value)
    for name, part in files.items():
        filename, content, mime = part
        form.add_field(name, content, filename=filename, content_type=mime)
    return form


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b
