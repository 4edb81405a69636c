"""``web_fetch`` against a local site: Markdown of a real page, the size cap, redirects,
robots.txt, and the SSRF guard's refusals (docs: README "Web tools")."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from core.cancellation import CancellationToken
from core.tools.base import ToolContext, ToolResult
from core.tools.web_fetch import UNTRUSTED_CLOSE, UNTRUSTED_OPEN, web_fetch_tool
from core.web.fetch import FetchSettings, WebFetcher
from core.web.guard import AddressGuard, Resolver, system_resolver
from tests.web_tools.site import LocalSite, ScriptedResolver


@pytest.fixture
async def site() -> AsyncIterator[LocalSite]:
    async with LocalSite() as running:
        yield running


async def fetch(
    url: str,
    allow: Sequence[str] = ("127.0.0.1",),
    resolver: Resolver = system_resolver,
    **settings: object,
) -> ToolResult:
    fetcher = WebFetcher(
        AddressGuard.allowing(allow, resolver),
        FetchSettings(**settings),  # type: ignore[arg-type]
    )
    context = ToolContext("k", "s", "t", "c", CancellationToken(), Path("/nonexistent"))
    return await web_fetch_tool(fetcher).handler({"url": url}, context)


async def test_a_saved_page_comes_back_as_readable_markdown(site: LocalSite) -> None:
    result = await fetch(f"{site.url}/page")
    assert not result.is_error, result.text
    assert "UNTRUSTED input" in result.text
    body = result.text.split(UNTRUSTED_OPEN + "\n", 1)[1]
    assert body.endswith(UNTRUSTED_CLOSE)
    title, _, rest = body.partition("\n")
    assert title.startswith("# ") and "What is rustdoc?" in title
    assert "\n## Basic usage" in rest or "\n## [Basic usage]" in rest
    assert "```\n$ cargo new docs --lib" in body
    assert "<div" not in body and "<script" not in body


async def test_json_comes_back_as_it_is(site: LocalSite) -> None:
    result = await fetch(f"{site.url}/data.json")
    assert '{"answer": 42}' in result.text


async def test_reading_stops_at_max_bytes(site: LocalSite) -> None:
    result = await fetch(f"{site.url}/endless", max_bytes=64 * 1024)
    assert not result.is_error, result.text
    assert "65536 bytes read; the body was cut at the size limit" in result.text


async def test_a_redirect_is_followed(site: LocalSite) -> None:
    result = await fetch(f"{site.url}/redirect")
    assert f"Fetched {site.url}/page" in result.text
    assert "What is rustdoc?" in result.text
    assert site.paths() == ["/robots.txt", "/redirect", "/robots.txt", "/page"]


async def test_robots_txt_is_respected_unless_turned_off(site: LocalSite) -> None:
    site.robots = "User-agent: *\nDisallow: /page\n"
    refused = await fetch(f"{site.url}/page")
    assert refused.is_error
    assert refused.text == f"web_fetch: {site.url}/page is disallowed by 127.0.0.1's robots.txt"
    fetched = await fetch(f"{site.url}/page", respect_robots=False)
    assert "What is rustdoc?" in fetched.text


async def test_a_pdf_is_refused_readably(site: LocalSite) -> None:
    result = await fetch(f"{site.url}/file.pdf")
    assert result.is_error
    assert "is a PDF; web_fetch reads HTML, text and JSON only" in result.text


@pytest.mark.parametrize(
    ("host", "why"),
    [
        ("127.0.0.1", "refused to connect to 127.0.0.1: a loopback address"),
        ("10.0.0.1", "refused to connect to 10.0.0.1: a private address"),
        ("169.254.169.254", "refused to connect to 169.254.169.254: a cloud metadata address"),
        ("[::1]", "refused to connect to ::1: a loopback address"),
        (
            "[::ffff:127.0.0.1]",
            "refused to connect to ::ffff:127.0.0.1: a loopback address (127.0.0.1 inside it)",
        ),
        (
            "[64:ff9b::a00:1]",
            "refused to connect to 64:ff9b::a00:1: a private address (10.0.0.1 inside it)",
        ),
        ("[fd00:ec2::254]", "refused to connect to fd00:ec2::254: a cloud metadata address"),
    ],
)
async def test_an_inside_address_is_refused(site: LocalSite, host: str, why: str) -> None:
    result = await fetch(f"http://{host}:{site.port}/page", allow=())
    assert result.is_error
    assert result.text.startswith(f"web_fetch: {why}")
    assert "[web_tools] allow_hosts" in result.text
    assert site.requests == []


async def test_a_name_that_resolves_inside_is_refused(site: LocalSite) -> None:
    resolver = ScriptedResolver([["127.0.0.1"]])
    result = await fetch(f"http://intranet.test:{site.port}/page", allow=(), resolver=resolver)
    assert result.text.startswith(
        "web_fetch: refused to connect to intranet.test (127.0.0.1): a loopback address"
    )
    assert resolver.asked == ["intranet.test"]
    assert site.requests == []


async def test_a_name_with_one_inside_answer_among_others_is_refused(site: LocalSite) -> None:
    resolver = ScriptedResolver([["93.184.215.14", "10.1.2.3"]])
    result = await fetch(f"http://mixed.test:{site.port}/page", allow=(), resolver=resolver)
    assert "refused to connect to mixed.test (10.1.2.3): a private address" in result.text


async def test_a_redirect_from_an_allowed_host_to_a_refused_one_is_refused(
    site: LocalSite,
) -> None:
    result = await fetch(f"{site.url}/away?to=http://10.0.0.1/admin")
    assert result.is_error
    assert result.text == (
        "web_fetch: refused to connect to 10.0.0.1: a private address; "
        "add it to [web_tools] allow_hosts to allow it"
    )
    assert site.paths() == ["/robots.txt", "/away"]


async def test_the_checked_answer_is_the_one_connected_to(site: LocalSite) -> None:
    """A rebinding resolver: its second answer never reaches a connection."""
    resolver = ScriptedResolver([["127.0.0.1"], ["10.0.0.1"]])
    result = await fetch(f"http://rebind.test:{site.port}/page", resolver=resolver)
    assert not result.is_error, result.text
    assert "What is rustdoc?" in result.text
    assert resolver.asked == ["rebind.test"]  # one connection, resolved once, pinned
    assert {seen.host for seen in site.requests} == {f"rebind.test:{site.port}"}


async def test_a_rebinding_answer_after_a_refusal_is_never_used(site: LocalSite) -> None:
    resolver = ScriptedResolver([["10.0.0.1"], ["127.0.0.1"]])
    result = await fetch(f"http://rebind.test:{site.port}/page", resolver=resolver)
    assert result.text.startswith(
        "web_fetch: refused to connect to rebind.test (10.0.0.1): a private address"
    )
    assert site.requests == []


async def test_a_non_web_url_is_refused(site: LocalSite) -> None:
    result = await fetch("file:///etc/passwd")
    assert (
        result.text
        == "web_fetch: only http:// and https:// URLs are fetched, not file:///etc/passwd"
    )
