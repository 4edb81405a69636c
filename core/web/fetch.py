"""Fetch one web page as text for the agent (the ``web_fetch`` tool, :mod:`core.tools.web_fetch`).

A GET through :func:`core.web.client.guarded_client` (every connection checked and pinned by
:mod:`core.web.guard`), following at most ``max_redirects`` redirects itself (each hop its
own request, so each new host is checked), reading the body while it streams and stopping at
``max_bytes`` (the page is then marked truncated), the whole fetch bounded by ``timeout``
seconds. robots.txt of each hop's origin is asked first unless ``respect_robots`` is off
(RFC 9309: a missing file allows all, a server error disallows).

Content types: HTML (to Markdown with ``trafilatura``), text, JSON. PDF and anything else are
refused with a readable :class:`FetchError`.
"""

from __future__ import annotations

import asyncio
import urllib.robotparser
from dataclasses import dataclass

import httpx

from core.web.client import ROBOTS_AGENT, guarded_client
from core.web.guard import AddressGuard, Refused

DEFAULT_MAX_BYTES = 5 * 1024 * 1024
"""``[web_tools] max_bytes``: the most of a body read (5 MB)."""
DEFAULT_TIMEOUT = 20.0
MAX_REDIRECTS = 5
_ROBOTS_BYTES = 512 * 1024

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
JSON_TYPES = frozenset({"application/json"})


class FetchError(Exception):
    """A fetch that failed or was refused; ``str()`` is the readable reason."""


@dataclass(frozen=True, slots=True)
class FetchSettings:
    max_bytes: int = DEFAULT_MAX_BYTES
    timeout: float = DEFAULT_TIMEOUT
    respect_robots: bool = True
    max_redirects: int = MAX_REDIRECTS


@dataclass(frozen=True, slots=True)
class Page:
    """What was fetched: the final URL (after redirects), its content type, its text."""

    url: str
    content_type: str
    text: str
    size: int
    truncated: bool


@dataclass(frozen=True, slots=True)
class _Body:
    url: str
    content_type: str
    charset: str
    data: bytes
    truncated: bool


class WebFetcher:
    """Fetches pages under one :class:`AddressGuard` and one :class:`FetchSettings`."""

    def __init__(self, guard: AddressGuard, settings: FetchSettings | None = None) -> None:
        self._guard = guard
        self._settings = settings or FetchSettings()

    async def fetch(self, url: str) -> Page:
        """The page at ``url`` as text, or :class:`FetchError` saying why not."""
        try:
            async with asyncio.timeout(self._settings.timeout):
                body = await self._download(url)
        except TimeoutError:
            raise FetchError(f"{url} took longer than {self._settings.timeout:g} s") from None
        except Refused as refused:
            raise FetchError(str(refused)) from None
        except httpx.HTTPError as error:
            raise FetchError(f"could not fetch {url}: {_describe(error)}") from None
        text = await as_text(body.content_type, body.data, body.charset, body.url)
        return Page(body.url, body.content_type, text, len(body.data), body.truncated)

    async def _download(self, url: str) -> _Body:
        current = _web_url(url)
        async with guarded_client(self._guard, self._settings.timeout) as client:
            for _ in range(self._settings.max_redirects + 1):
                if self._settings.respect_robots:
                    await _robots_allow(client, current)
                async with client.stream("GET", current) as response:
                    if not response.is_redirect:
                        return await self._body(response)
                    current = _web_url(str(response.url.join(response.headers["location"])))
        raise FetchError(f"{url} redirected more than {self._settings.max_redirects} times")

    async def _body(self, response: httpx.Response) -> _Body:
        url = str(response.url)
        if response.status_code >= 400:
            raise FetchError(f"{url} answered HTTP {response.status_code}")
        content_type = _content_type(url, response.headers.get("content-type", ""))
        data, truncated = await _read_capped(response, self._settings.max_bytes)
        return _Body(url, content_type, response.charset_encoding or "utf-8", data, truncated)


def _web_url(url: str) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as error:
        raise FetchError(f"not a valid URL: {url} ({error})") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise FetchError(f"only http:// and https:// URLs are fetched, not {url}")
    return parsed


def _content_type(url: str, header: str) -> str:
    kind = header.split(";", 1)[0].strip().lower()
    if kind in HTML_TYPES or kind in JSON_TYPES or kind.endswith("+json"):
        return kind
    if kind.startswith("text/"):
        return kind
    if kind == "application/pdf":
        raise FetchError(f"{url} is a PDF; web_fetch reads HTML, text and JSON only")
    shown = kind or "no content type"
    raise FetchError(f"{url} is {shown}; web_fetch reads HTML, text and JSON only")


async def _read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """The body up to ``limit`` bytes, read as it streams; whether it was cut there."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


async def _robots_allow(client: httpx.AsyncClient, url: httpx.URL) -> None:
    """Raise :class:`FetchError` when the origin's robots.txt disallows ``url``."""
    robots = url.copy_with(path="/robots.txt", query=None, fragment=None)
    async with client.stream("GET", robots) as response:
        status = response.status_code
        if status >= 500:
            raise FetchError(f"{url.host}'s robots.txt answered HTTP {status}: not fetched")
        if status != 200:
            return  # missing (or moved): everything is allowed
        data, _ = await _read_capped(response, _ROBOTS_BYTES)
    parser = urllib.robotparser.RobotFileParser()
    parser.parse(data.decode("utf-8", "replace").splitlines())
    if not parser.can_fetch(ROBOTS_AGENT, str(url)):
        raise FetchError(f"{url} is disallowed by {url.host}'s robots.txt")


async def as_text(content_type: str, data: bytes, charset: str, url: str) -> str:
    """The body as text: HTML to Markdown (off the event loop), the rest decoded."""
    if content_type in HTML_TYPES:
        return await asyncio.to_thread(html_to_markdown, data, url)
    try:
        return data.decode(charset, "replace")
    except LookupError:
        return data.decode("utf-8", "replace")


def html_to_markdown(html: bytes, url: str) -> str:
    """The page's main content as Markdown (``trafilatura``), else all of its text."""
    import trafilatura

    found = trafilatura.extract(
        html,
        url=url,
        output_format="markdown",
        include_formatting=True,
        include_links=True,
        include_tables=True,
        favor_recall=True,
    )
    return found or trafilatura.html2txt(html) or ""


def _describe(error: httpx.HTTPError) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
