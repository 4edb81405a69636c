"""The real page in headless Chromium (Debian's package, driven by Playwright for Python)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import threading
import time
from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from core.model.openai_client import OpenAIClient
from tests.support.model_server import ScriptedModelServer, reply_hang, reply_text
from tests.web.conftest import WebGatewayFactory
from tests.web.harness import Running

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SEEN = 10_000  # ms


CLOSE_SECONDS = 30.0
"""How long the teardown waits for Chromium to exit, then for its profile to be removed."""


@pytest.fixture
async def browser(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Browser]:
    """Chromium with its profile in a directory of this fixture (the driver's ``TMPDIR``).
    Teardown: closed (the driver waits for the process to exit), then the directory removed
    off the event loop, waited for at most :data:`CLOSE_SECONDS` and errors ignored: a
    slow disk under load never holds the test past its timeout."""
    profiles = tempfile.mkdtemp(prefix="chromium-")
    monkeypatch.setenv("TMPDIR", profiles)
    try:
        async with async_playwright() as playwright:
            launched = await playwright.chromium.launch(
                executable_path=CHROMIUM, args=CHROMIUM_ARGS
            )
            try:
                yield launched
            finally:
                async with asyncio.timeout(CLOSE_SECONDS):
                    await launched.close()
    finally:
        await _removed(profiles)


async def _removed(directory: str) -> None:
    """``directory`` removed in a daemon thread (errors ignored), waited for at most
    :data:`CLOSE_SECONDS`."""
    done = asyncio.Event()
    loop = asyncio.get_running_loop()

    def remove() -> None:
        shutil.rmtree(directory, ignore_errors=True)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(done.set)

    threading.Thread(target=remove, name="rm-chromium-profile", daemon=True).start()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), CLOSE_SECONDS)


def scripted(server: ScriptedModelServer) -> OpenAIClient:
    return OpenAIClient(base_url=server.url, model="scripted", trust_env=False)


async def open_chat(browser: Browser, gateway: Running) -> Page:
    page = await browser.new_page()
    await page.goto(gateway.url + "/")
    await expect(page.get_by_test_id("status")).to_have_text("connected", timeout=SEEN)
    return page


async def say(page: Page, text: str) -> None:
    await page.get_by_test_id("text").fill(text)
    await page.get_by_test_id("text").press("Enter")


def bot(page: Page, text: str) -> object:
    return page.locator(".msg.bot", has_text=text)


async def test_hello_shows_the_reply(browser: Browser, web_gateway: WebGatewayFactory) -> None:
    gateway = await web_gateway()
    page = await open_chat(browser, gateway)
    await say(page, "hello")
    await expect(page.locator(".msg.user", has_text="hello")).to_have_count(1, timeout=SEEN)
    await expect(page.locator(".msg.bot", has_text="[demo model]")).to_have_count(1, timeout=SEEN)


async def test_a_dangerous_command_shows_a_card_and_approve_runs_it(
    browser: Browser, web_gateway: WebGatewayFactory
) -> None:
    gateway = await web_gateway()
    page = await open_chat(browser, gateway)
    await say(page, "run: rm -rf ./old-build")
    card = page.locator(".msg.bot", has_text="Approval needed: terminal")
    await expect(card).to_contain_text("rm -rf ./old-build", timeout=SEEN)
    await card.get_by_role("button", name="✅ Approve").click()
    await expect(card).to_contain_text("✅ Approved by local", timeout=SEEN)
    await expect(card.get_by_role("button")).to_have_count(0)
    await expect(page.locator(".msg.bot", has_text="terminal")).not_to_have_count(0)
    await gateway.idle(page.url.rpartition("#c=")[2])


async def test_stop_during_a_slow_turn_ends_it_within_a_second_with_one_notice(
    browser: Browser, web_gateway: WebGatewayFactory, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_hang())
    gateway = await web_gateway(model=scripted(model_server))
    page = await open_chat(browser, gateway)
    await say(page, "take your time")
    await model_server.wait_for_requests(1)
    await expect(page.get_by_test_id("running")).to_be_visible(timeout=SEEN)
    clicked = time.monotonic()
    await page.get_by_test_id("stop").click()
    await expect(page.locator(".msg.bot", has_text="Stopped")).to_have_count(1, timeout=1000)
    assert time.monotonic() - clicked < 1.0
    await expect(page.get_by_test_id("running")).to_be_hidden(timeout=SEEN)
    await expect(page.locator(".msg.bot", has_text="Stopped")).to_have_count(1)


async def test_reloading_mid_turn_resumes_without_gaps_or_duplicates(
    browser: Browser, web_gateway: WebGatewayFactory, model_server: ScriptedModelServer
) -> None:
    release = asyncio.Event()
    model_server.script(
        reply_text("first answer"), reply_hang(then=reply_text("second answer"), until=release)
    )
    gateway = await web_gateway(model=scripted(model_server))
    page = await open_chat(browser, gateway)
    await say(page, "question one")
    await expect(page.locator(".msg.bot", has_text="first answer")).to_have_count(1, timeout=SEEN)
    await say(page, "question two")
    await model_server.wait_for_requests(2)
    await page.reload()
    await expect(page.get_by_test_id("status")).to_have_text("connected", timeout=SEEN)
    await expect(page.get_by_test_id("running")).to_be_visible()
    release.set()
    await expect(page.locator(".msg.bot", has_text="second answer")).to_have_count(1, timeout=SEEN)
    texts = await page.locator("article.msg").all_inner_texts()
    assert texts == ["question one", "first answer", "question two", "second answer"]


async def test_script_and_onerror_in_a_reply_render_as_inert_text(
    browser: Browser, web_gateway: WebGatewayFactory, model_server: ScriptedModelServer
) -> None:
    evil = (
        'Look: <script>alert(1)</script> and <img src=x onerror="alert(2)"> '
        "[x](javascript:alert(3))"
    )
    model_server.script(reply_text(evil))
    gateway = await web_gateway(model=scripted(model_server))
    page = await open_chat(browser, gateway)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    await say(page, "show me")
    reply = page.locator(".msg.bot", has_text="Look:")
    await expect(reply).to_contain_text("<script>alert(1)</script>", timeout=SEEN)
    await expect(reply).to_contain_text('<img src=x onerror="alert(2)">')
    assert await reply.locator("script, img, a[href^=javascript]").count() == 0
    assert dialogs == []
