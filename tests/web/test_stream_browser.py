"""The reply's text live in the real page (headless Chromium): the streamed text shows as
it arrives, then the rendered reply takes its place, once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from playwright.async_api import Browser, expect

from tests.support.model_server import ScriptedModelServer, reply_text
from tests.web.conftest import WebGatewayFactory
from tests.web.test_browser import SEEN, browser, open_chat, say, scripted  # noqa: F401
from tests.web.test_stream_http import REPLY, streaming


async def test_the_live_text_shows_then_the_reply_takes_its_place(
    browser: Browser,  # noqa: F811
    web_gateway: WebGatewayFactory,
    model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:
    release = asyncio.Event()
    model_server.script(
        reply_text(REPLY, chunks=["The ", "answer ", "is ", "forty ", "two."],
                   stall_after=3, until=release)
    )  # fmt: skip
    gateway = await web_gateway(model=scripted(model_server), extra=streaming(tmp_path))
    page = await open_chat(browser, gateway)
    await say(page, "what is it?")

    live = page.get_by_test_id("live")
    await expect(live).to_have_text("The answer", timeout=SEEN)
    await expect(page.locator("#messages > article").last).to_have_id("live")
    release.set()
    await expect(page.locator(".msg.bot", has_text="forty two")).to_have_count(1, timeout=SEEN)
    await expect(live).to_have_count(0)
    texts = await page.locator("article.msg").all_inner_texts()
    assert texts == ["what is it?", REPLY]
