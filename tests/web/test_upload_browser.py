"""A file through the real page in headless Chromium, both ways: picked with the 📎 button,
sent with a caption, seen by the model and saved in the session's workspace; a file the
agent sends back shows as a download link served only to this conversation."""

from __future__ import annotations

import json
from pathlib import Path

from playwright.async_api import Browser, expect

from core.tools.sandbox import Workspaces
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call
from tests.web.conftest import WebGatewayFactory
from tests.web.test_browser import SEEN, browser, open_chat, say, scripted  # noqa: F401

NOTES = b"line one\nline two\n"


async def test_a_file_picked_with_the_button_reaches_the_model_and_one_sent_back_is_a_link(
    browser: Browser,  # noqa: F811
    web_gateway: WebGatewayFactory,
    model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:
    model_server.script(
        reply_tool_call("send_file", {"path": "inbox/notes.txt", "caption": "your notes back"}),
        reply_text("Two lines of notes."),
    )
    gateway = await web_gateway(model=scripted(model_server))
    page = await open_chat(browser, gateway)
    picked = {"name": "notes.txt", "mimeType": "text/plain", "buffer": NOTES}
    await page.get_by_test_id("file-input").set_input_files(picked)
    chip = page.get_by_test_id("pending-file")
    await expect(chip).to_contain_text("notes.txt (18 B)", timeout=SEEN)
    await expect(chip).not_to_have_class("chip uploading", timeout=SEEN)
    await say(page, "what is in this file?")
    bubble = page.locator(".msg.user", has_text="what is in this file?")
    await expect(bubble.get_by_test_id("sent-file")).to_have_text("📎 notes.txt (18 B)")
    await expect(page.get_by_test_id("pending")).to_be_hidden()

    first, *_ = await model_server.wait_for_requests(1)
    said = json.dumps(first.messages[-1]["content"])
    assert "what is in this file?" in said and "notes.txt" in said and "inbox/" in said
    conversation = page.url.rpartition("#c=")[2]
    workspace = Workspaces(tmp_path / "workspace").path_for(f"web:dm:{conversation}")
    assert (workspace / "inbox" / "notes.txt").read_bytes() == NOTES

    link = page.get_by_test_id("file-link")
    await expect(link).to_have_text("📎 notes.txt", timeout=SEEN)
    await expect(page.locator(".msg.bot", has_text="your notes back")).to_have_count(1)
    await expect(page.locator(".msg.bot", has_text="Two lines of notes.")).to_have_count(1)
    href = await link.get_attribute("href")
    assert href is not None and href.startswith("/api/files/")
    async with page.expect_download() as download_info:
        await link.click()
    download = await download_info.value
    assert download.suggested_filename == "notes.txt"
    assert await (await page.request.get(gateway.url + href)).body() == NOTES
    stranger = href.replace(conversation, "someoneelse123")
    assert (await page.request.get(gateway.url + stranger)).status == 404
    await gateway.idle(conversation)
