"""Web search through a configured provider (the ``web_search`` tool).

Two providers, each a documented JSON API:

- ``searxng``: a SearXNG instance's ``GET <search_url>/search?q=…&format=json`` (the
  instance must list ``json`` under ``search.formats``; else it answers 403). Results are
  ``results[]`` with ``title``, ``url``, ``content``. No key.
- ``brave``: Brave Search's ``GET <search_url>/res/v1/web/search?q=…&count=N`` with the key
  in ``X-Subscription-Token``. Results are ``web.results[]`` with ``title``, ``url``,
  ``description`` (which may hold ``<strong>`` marks). An error is ``{"type":
  "ErrorResponse", "error": {"code", "detail", "status"}}``.

The provider's URL is the operator's, so it is reached directly (not through the SSRF
guard: a self-hosted SearXNG usually lives on the same host). Any failure — unreachable,
an HTTP error, a body that is not the documented shape — is one :class:`SearchError`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from core.web.client import USER_AGENT

SearchProvider = Literal["searxng", "brave"]
PROVIDERS: tuple[SearchProvider, ...] = ("searxng", "brave")
BRAVE_URL = "https://api.search.brave.com"
MAX_COUNT = 20
_TAG = re.compile(r"<[^>]{0,200}>")


class SearchError(Exception):
    """The provider could not answer; ``str()`` is the readable reason."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True, slots=True)
class SearchSettings:
    provider: SearchProvider
    url: str
    api_key: str | None = None
    timeout: float = 20.0


@dataclass(frozen=True, slots=True)
class _Request:
    url: str
    params: dict[str, str | int]
    headers: dict[str, str]


class WebSearch:
    """Searches through one provider."""

    def __init__(self, settings: SearchSettings) -> None:
        self._settings = settings

    async def search(self, query: str, count: int) -> list[SearchResult]:
        """At most ``count`` results for ``query``, or :class:`SearchError`."""
        build, parse = _SHAPES[self._settings.provider]
        request = build(self._settings, query, count)
        body = await self._get(request)
        try:
            return parse(body)[:count]
        except (KeyError, TypeError, AttributeError) as error:
            raise SearchError(
                f"{self._settings.provider} answered in an unexpected shape ({error!r})"
            ) from None

    async def _get(self, request: _Request) -> Any:
        name = self._settings.provider
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json", **request.headers}
        try:
            async with httpx.AsyncClient(timeout=self._settings.timeout) as client:
                response = await client.get(request.url, params=request.params, headers=headers)
        except httpx.HTTPError as error:
            raise SearchError(f"{name} could not be reached: {type(error).__name__}") from None
        if response.status_code != 200:
            raise SearchError(f"{name} answered HTTP {response.status_code}{_why(response)}")
        try:
            return response.json()
        except ValueError:
            raise SearchError(f"{name} answered something that is not JSON") from None


def _why(response: httpx.Response) -> str:
    """The provider's own words for an error, when its body has them."""
    try:
        body = response.json()
    except ValueError:
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, Mapping):
        detail = error.get("detail") or error.get("code")
        return f": {detail}" if detail else ""
    return ""


def _searxng_request(settings: SearchSettings, query: str, count: int) -> _Request:
    url = settings.url.rstrip("/") + "/search"
    return _Request(url, {"q": query, "format": "json"}, {})


def _searxng_results(body: Any) -> list[SearchResult]:
    return [
        SearchResult(_plain(item["title"]), item["url"], _plain(item.get("content") or ""))
        for item in body["results"]
    ]


def _brave_request(settings: SearchSettings, query: str, count: int) -> _Request:
    url = (settings.url or BRAVE_URL).rstrip("/") + "/res/v1/web/search"
    token = {"X-Subscription-Token": settings.api_key or ""}
    return _Request(url, {"q": query, "count": min(count, MAX_COUNT)}, token)


def _brave_results(body: Any) -> list[SearchResult]:
    web = body.get("web") or {"results": []}
    return [
        SearchResult(_plain(item["title"]), item["url"], _plain(item.get("description") or ""))
        for item in web["results"]
    ]


def _plain(text: str) -> str:
    """A snippet without the provider's emphasis marks and entities."""
    return html.unescape(_TAG.sub("", text)).strip()


_SHAPES: dict[
    SearchProvider,
    tuple[
        Callable[[SearchSettings, str, int], _Request],
        Callable[[Any], list[SearchResult]],
    ],
] = {
    "searxng": (_searxng_request, _searxng_results),
    "brave": (_brave_request, _brave_results),
}
