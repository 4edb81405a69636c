"""``web_search`` against local fakes speaking SearXNG's and Brave Search's documented JSON;
a provider error is one readable tool error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from core.cancellation import CancellationToken
from core.tools.base import ToolContext, ToolResult
from core.tools.web_search import web_search_tool
from core.web.search import SearchProvider, SearchSettings, WebSearch

# SearXNG /search?format=json (searx/webapp.py, the "json" output format): abridged.
SEARXNG_BODY: dict[str, Any] = {
    "query": "rustdoc",
    "number_of_results": 0,
    "results": [
        {
            "url": "https://doc.rust-lang.org/rustdoc/",
            "title": "The rustdoc book",
            "content": "The standard Rust distribution ships with a tool called rustdoc.",
            "engine": "duckduckgo",
            "parsed_url": ["https", "doc.rust-lang.org", "/rustdoc/", "", "", ""],
            "template": "default.html",
            "engines": ["duckduckgo", "brave"],
            "positions": [1, 2],
            "score": 4.0,
            "category": "general",
        },
        {
            "url": "https://github.com/rust-lang/rust",
            "title": "rust-lang/rust &amp; rustdoc",
            "content": "",
            "engine": "brave",
            "engines": ["brave"],
            "positions": [3],
            "score": 0.33,
            "category": "general",
        },
    ],
    "answers": [],
    "corrections": [],
    "infoboxes": [],
    "suggestions": ["rustdoc book"],
    "unresponsive_engines": [],
}

# Brave Search GET /res/v1/web/search (WebSearchApiResponse): abridged.
BRAVE_BODY: dict[str, Any] = {
    "type": "search",
    "query": {"original": "rustdoc", "more_results_available": True},
    "mixed": {"type": "mixed", "main": [{"type": "web", "index": 0, "all": False}]},
    "web": {
        "type": "search",
        "results": [
            {
                "type": "search_result",
                "title": "What is rustdoc? - The rustdoc book",
                "url": "https://doc.rust-lang.org/rustdoc/what-is-rustdoc.html",
                "description": "The standard Rust distribution ships with a tool called "
                "<strong>rustdoc</strong>.",
                "is_source_local": False,
                "is_source_both": False,
                "profile": {"name": "Rust", "url": "https://doc.rust-lang.org"},
                "language": "en",
                "family_friendly": True,
                "subtype": "generic",
            }
        ],
        "family_friendly": True,
    },
}

BRAVE_INVALID_TOKEN: dict[str, Any] = {
    "type": "ErrorResponse",
    "error": {
        "id": "a4c0c1d6-9b43-4f1b-8b0f-2d3c4e5f6a7b",
        "status": 422,
        "code": "SUBSCRIPTION_TOKEN_INVALID",
        "detail": "The provided subscription token is invalid.",
        "meta": {"component": "authentication"},
    },
    "time": 1760000000,
}


@dataclass
class FakeProvider:
    """One route answering ``body`` with ``status``; records query strings and headers."""

    path: str
    body: Any
    status: int = 200
    seen: list[dict[str, str]] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    port: int = 0

    async def _answer(self, request: web.Request) -> web.Response:
        self.seen.append(dict(request.query))
        self.tokens.append(request.headers.get("X-Subscription-Token", ""))
        return web.json_response(self.body, status=self.status)


@pytest.fixture
async def serve() -> AsyncIterator[Any]:
    runners: list[web.AppRunner] = []

    async def start(fake: FakeProvider) -> str:
        app = web.Application()
        app.router.add_get(fake.path, fake._answer)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    yield start
    for runner in runners:
        await runner.cleanup()


async def run(
    provider: SearchProvider, url: str, args: dict[str, Any], key: str | None = None
) -> ToolResult:
    tool = web_search_tool(WebSearch(SearchSettings(provider, url, key)))
    context = ToolContext("k", "s", "t", "c", CancellationToken(), Path("/nonexistent"))
    return await tool.handler(args, context)


async def test_searxng_results_are_titles_urls_and_snippets(serve: Any) -> None:
    fake = FakeProvider("/search", SEARXNG_BODY)
    result = await run("searxng", await serve(fake), {"query": "rustdoc", "count": 5})
    assert not result.is_error
    assert "1. The rustdoc book\n   https://doc.rust-lang.org/rustdoc/\n   The standard" in (
        result.text
    )
    assert "2. rust-lang/rust & rustdoc\n   https://github.com/rust-lang/rust" in result.text
    assert "UNTRUSTED input" in result.text
    assert fake.seen == [{"q": "rustdoc", "format": "json"}]


async def test_searxng_results_are_cut_to_count(serve: Any) -> None:
    fake = FakeProvider("/search", SEARXNG_BODY)
    result = await run("searxng", await serve(fake), {"query": "rustdoc", "count": 1})
    assert "1 results for 'rustdoc'" in result.text
    assert "github.com" not in result.text


async def test_brave_results_carry_the_key_and_lose_their_marks(serve: Any) -> None:
    fake = FakeProvider("/res/v1/web/search", BRAVE_BODY)
    result = await run("brave", await serve(fake), {"query": "rustdoc", "count": 3}, "BSA-key")
    assert "1. What is rustdoc? - The rustdoc book" in result.text
    assert "a tool called rustdoc." in result.text and "<strong>" not in result.text
    assert fake.seen == [{"q": "rustdoc", "count": "3"}]
    assert fake.tokens == ["BSA-key"]


async def test_a_brave_error_is_one_readable_tool_error(serve: Any) -> None:
    fake = FakeProvider("/res/v1/web/search", BRAVE_INVALID_TOKEN, status=422)
    result = await run("brave", await serve(fake), {"query": "rustdoc"}, "wrong")
    assert result.is_error
    assert result.text == (
        "web_search: brave answered HTTP 422: The provided subscription token is invalid."
    )


async def test_a_searxng_without_json_output_is_one_readable_tool_error(serve: Any) -> None:
    fake = FakeProvider("/search", "Forbidden", status=403)
    result = await run("searxng", await serve(fake), {"query": "rustdoc"})
    assert result.is_error and result.text == "web_search: searxng answered HTTP 403"


async def test_a_body_of_another_shape_is_one_readable_tool_error(serve: Any) -> None:
    fake = FakeProvider("/search", {"unexpected": True})
    result = await run("searxng", await serve(fake), {"query": "rustdoc"})
    assert result.is_error
    assert result.text.startswith("web_search: searxng answered in an unexpected shape")


async def test_an_unreachable_provider_is_one_readable_tool_error() -> None:
    closed = await run("searxng", "http://127.0.0.1:9", {"query": "x"})
    assert closed.is_error
    assert closed.text == "web_search: searxng could not be reached: ConnectError"
