"""An httpx transport over aiohttp, for the model client.

httpx's own transport (httpcore + anyio + h11) costs about 1 ms of CPU per model call on
loopback, about a quarter of what the gateway spends on a plain message; aiohttp does the
same wire work for about a third of that. The client keeps httpx's API — requests, streamed
responses and its exception tree, which :func:`core.model.classify.classify_transport`
reads — and only the bytes go through aiohttp. Foreign errors are translated here:

    connect timed out            → httpx.ConnectTimeout
    read timed out               → httpx.ReadTimeout
    cannot connect               → httpx.ConnectError
    connection broken mid-reply  → httpx.ReadError
    not http(s)                  → httpx.UnsupportedProtocol

Bodies are passed through undecoded (httpx decodes ``Content-Encoding`` itself). A reply
closed before it was read to the end closes its connection (a cancelled stream never
leaves a half-read connection in the pool). Proxies come from the environment once per
scheme and host when ``trust_env`` (aiohttp's own ``trust_env`` would read it, and
``~/.netrc``, in a worker thread on every call). Requests are never retried here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import httpx
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

Proxy = tuple[URL | None, aiohttp.BasicAuth | None]
_NOT_FORWARDED = {"host", "content-length", "transfer-encoding", "connection"}


class AiohttpTransport(httpx.AsyncBaseTransport):
    def __init__(self, *, trust_env: bool = True, idle_timeout: float | None = None) -> None:
        """``idle_timeout``: the longest gap between body bytes once the first arrived
        (None: httpx's ``read`` timeout bounds every wait)."""
        self._trust_env = trust_env
        self._idle_timeout = idle_timeout
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[tuple[str, str | None], Proxy] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = URL(str(request.url), encoded=True)
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"Request URL has an unsupported protocol '{url}'")
        body = await request.aread()
        proxy, proxy_auth = self._proxy_for(url)
        try:
            response = await self._open_session().request(
                request.method, url, data=body or None, headers=_headers(request),
                timeout=_timeout(request), proxy=proxy, proxy_auth=proxy_auth,
                allow_redirects=False,
            )  # fmt: skip
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _translated(exc, request) from exc
        return httpx.Response(
            response.status,
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers],
            stream=_Body(response, request, self._idle_timeout),
            request=request,
        )

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(auto_decompress=False)
        return self._session

    def _proxy_for(self, url: URL) -> Proxy:
        if not self._trust_env:
            return None, None
        key = (url.scheme, url.host)
        if key not in self._proxies:
            try:
                self._proxies[key] = get_env_proxy_for_url(url)
            except LookupError:
                self._proxies[key] = (None, None)
        return self._proxies[key]


class _Body(httpx.AsyncByteStream):
    """A reply's body as aiohttp reads it; closing it early closes the connection. After the
    first bytes the socket's read timeout becomes ``idle_timeout`` (module doc)."""

    def __init__(
        self, response: aiohttp.ClientResponse, request: httpx.Request, idle: float | None
    ) -> None:
        self._response, self._request, self._idle = response, request, idle

    async def __aiter__(self) -> AsyncIterator[bytes]:
        first = True
        try:
            async for chunk in self._response.content.iter_any():
                if first:
                    first = False
                    self._now_flowing()
                yield chunk
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _translated(exc, self._request) from exc

    def _now_flowing(self) -> None:
        """The first bytes came: from now on each gap is bounded by the idle timeout."""
        connection = self._response.connection
        protocol = None if connection is None else connection.protocol
        if self._idle is None or protocol is None:
            return
        protocol.read_timeout = self._idle
        protocol.start_timeout()  # re-arm the timer with the new length, from now

    async def aclose(self) -> None:
        if self._response.content.at_eof():
            self._response.release()
        else:
            self._response.close()


def _headers(request: httpx.Request) -> list[tuple[str, str]]:
    return [
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, value in request.headers.raw
        if name.decode("latin-1").lower() not in _NOT_FORWARDED
    ]


def _timeout(request: httpx.Request) -> aiohttp.ClientTimeout:
    """httpx's per-request timeouts (``request.extensions["timeout"]``) in aiohttp's terms."""
    given = request.extensions.get("timeout", {})
    connect, pool, read = given.get("connect"), given.get("pool"), given.get("read")
    waiting = None if connect is None or pool is None else connect + pool
    return aiohttp.ClientTimeout(total=None, connect=waiting, sock_connect=connect, sock_read=read)


def _translated(exc: Exception, request: httpx.Request) -> httpx.TransportError:
    """aiohttp's errors as httpx's."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(str(exc) or "connect timed out", request=request)
    if isinstance(exc, TimeoutError):
        return httpx.ReadTimeout(str(exc) or "read timed out", request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx.ConnectError(str(exc), request=request)
    return httpx.ReadError(f"{type(exc).__name__}: {exc}", request=request)
