"""``[web_tools]``: how ``web_fetch`` and ``web_search`` reach the web (``core.web``).

The tools exist only for a profile whose ``tools`` list names them; this section says how
they behave. ``allow_hosts`` opens the SSRF guard for named hosts, addresses or networks
(``"127.0.0.1"``, ``"intranet.example"``, ``"10.1.0.0/16"``); ``search_provider`` is unset
(no ``web_search``), ``searxng`` (``search_url`` required) or ``brave`` (``search_api_key``
required, a secret masked everywhere; env ``COMMONOS_SEARCH_API_KEY``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Literal

from adapters.config import (
    Flag,
    HttpUrl,
    PositiveInt,
    PositiveNumber,
    Section,
    choice,
    secret_field,
)
from adapters.config_reader import Check

if TYPE_CHECKING:
    from core.tools.base import Tool
    from core.web.fetch import WebFetcher
    from core.web.search import WebSearch

WEB_TOOLS = ("web_fetch", "web_search")
Provider = Literal["searxng", "brave"]


class WebToolsSection(Section):
    allow_hosts: tuple[str, ...] = ()
    """Hosts, addresses or networks the guard lets through although they are not public."""
    max_bytes: PositiveInt = 5 * 1024 * 1024
    """The most of a page's body read, in bytes (5 MB); the page is cut there."""
    timeout: PositiveNumber = 20.0
    """Seconds one fetch or search may take, redirects included."""
    respect_robots: Flag = True
    """Ask each site's robots.txt before fetching from it."""
    search_provider: Annotated[Provider, Check(choice("searxng", "brave"))] | None = None
    """Unset: no ``web_search`` tool."""
    search_url: HttpUrl | None = None
    """SearXNG: the instance's URL (required). Brave: default https://api.search.brave.com."""
    search_api_key: str | None = secret_field("COMMONOS_SEARCH_API_KEY")
    """Brave Search's subscription token."""

    def problems(self) -> Iterator[tuple[str, str]]:
        if self.search_provider == "searxng" and self.search_url is None:
            yield "search_url", 'expected the SearXNG URL for search_provider = "searxng"'
        if self.search_provider == "brave":
            missing = self.missing_secret("search_api_key", 'for search_provider = "brave"')
            if missing:
                yield missing

    def fetcher(self) -> WebFetcher:
        """The ``web_fetch`` tool's fetcher (imports ``core.web`` only now)."""
        from core.web.fetch import FetchSettings, WebFetcher
        from core.web.guard import AddressGuard

        settings = FetchSettings(self.max_bytes, self.timeout, self.respect_robots)
        return WebFetcher(AddressGuard.allowing(self.allow_hosts), settings)

    def search(self) -> WebSearch | None:
        """The ``web_search`` tool's provider (None: no provider is configured)."""
        from core.web.search import SearchSettings, WebSearch

        if self.search_provider is None:
            return None
        url = self.search_url or ""
        key = self.search_api_key
        return WebSearch(SearchSettings(self.search_provider, url, key, self.timeout))

    def tools(self, wanted: tuple[str, ...] | None) -> list[Tool]:
        """The web tools a profile's ``tools`` list names (none when it names none, or
        lists no tools at all: these are never on by default)."""
        named = [name for name in WEB_TOOLS if wanted is not None and name in wanted]
        if not named:
            return []  # nothing of core.web is imported
        from core.tools.web_fetch import web_fetch_tool
        from core.tools.web_search import web_search_tool

        built: list[Tool] = []
        if "web_fetch" in named:
            built.append(web_fetch_tool(self.fetcher()))
        search = self.search() if "web_search" in named else None
        if search is not None:
            built.append(web_search_tool(search))
        return built
