"""The dashboard in headless Chromium, watching a Telegram turn in the Telegram simulator."""

from __future__ import annotations

import re

from playwright.async_api import Browser, Page, expect

from gateway.outbound.messages import STOPPED
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import (
    ScriptedModelServer,
    reply_hang,
    reply_text,
    reply_tool_call,
)
from tests.web.conftest import WebGatewayFactory
from tests.web.test_browser import SEEN, browser, scripted

__all__ = ["browser"]  # the fixture, shared with test_browser


async def dashboard_beside_telegram(
    browser: Browser, web_gateway: WebGatewayFactory, telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
) -> Page:  # fmt: skip
    """The dashboard of a gateway that also runs Telegram (Alice allowed), open and live."""
    telegram = {
        "token": telegram_sim.token,
        "base_url": f"{telegram_sim.url}/bot",
        "base_file_url": f"{telegram_sim.url}/file/bot",
    }
    extra = {
        "telegram": telegram,
        "access": {"telegram": [ALICE.id]},
        "approvals": {"web": ["local"]},
    }
    gateway = await web_gateway(model=scripted(model_server), extra=extra)
    page = await browser.new_page()
    await page.goto(gateway.url + "/dashboard")
    await expect(page.get_by_test_id("platforms")).to_contain_text(
        "telegram: up since", timeout=SEEN
    )
    return page


async def test_dashboard_stops_a_telegram_turn_and_approves_its_card(
    browser: Browser,
    web_gateway: WebGatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
) -> None:
    model_server.script(
        reply_hang(),
        reply_tool_call("terminal", {"command": "rm -rf ./scratch"}),
        reply_text("Cleaned up."),
    )
    page = await dashboard_beside_telegram(browser, web_gateway, telegram_sim, model_server)

    await telegram_sim.user_says(ALICE.id, "think hard", user=ALICE)
    await model_server.wait_for_requests(1)
    row = page.get_by_test_id("running-turn").filter(has_text=f"telegram:dm:{ALICE.id}")
    await expect(row).to_have_count(1, timeout=SEEN)
    await expect(row.locator("td.who")).to_have_text(ALICE.first_name, timeout=SEEN)
    await expect(row).to_contain_text("telegram")
    await row.get_by_test_id("dash-stop").click()
    await expect(row).to_have_count(0, timeout=SEEN)
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == STOPPED)
    recent = page.get_by_test_id("recent-turn").filter(has_text="interrupted")
    await expect(recent).to_have_count(1, timeout=SEEN)

    await telegram_sim.user_says(ALICE.id, "clean the scratch dir", user=ALICE)
    card = await telegram_sim.wait_for_bot_message(
        ALICE.id, lambda m: "rm -rf ./scratch" in m.text, timeout=SEEN / 1000
    )
    pending = page.get_by_test_id("pending-approval").filter(has_text="rm -rf ./scratch")
    await expect(pending).to_have_count(1, timeout=SEEN)
    await pending.get_by_test_id("dash-approve").click()
    await telegram_sim.wait_for(lambda: "✅ Approved by local" in card.text, timeout=SEEN / 1000)
    await telegram_sim.wait_for(lambda: not card.buttons, timeout=SEEN / 1000)
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Cleaned up.")
    await expect(pending).to_have_count(0, timeout=SEEN)
    stopped = [m for m in telegram_sim.bot_messages(ALICE.id) if "Stopped" in m.text]
    assert [m.text for m in stopped] == [STOPPED], "the dashboard's Stop: one notice, as /stop"


async def test_a_running_turns_row_keeps_its_stop_button_and_a_half_typed_steer_as_it_ticks(
    browser: Browser,
    web_gateway: WebGatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
) -> None:
    model_server.script(reply_hang())
    page = await dashboard_beside_telegram(browser, web_gateway, telegram_sim, model_server)
    await telegram_sim.user_says(ALICE.id, "think hard", user=ALICE)
    await model_server.wait_for_requests(1)
    row = page.get_by_test_id("running-turn").filter(has_text=f"telegram:dm:{ALICE.id}")
    elapsed = row.locator("td").nth(3)
    await expect(elapsed).to_have_text(re.compile(r"\d"), timeout=SEEN)
    stop = await row.get_by_test_id("dash-stop").element_handle()
    await row.get_by_test_id("dash-steer-text").fill("use the cache")

    for _ in range(3):  # three new states, each with the turn's elapsed time changed
        shown = await elapsed.text_content()
        await expect(elapsed).not_to_have_text(shown or "", timeout=SEEN)

    assert stop is not None and await stop.evaluate("button => button.isConnected")
    await expect(row.get_by_test_id("dash-steer-text")).to_have_value("use the cache")
    await stop.click()
    await expect(row).to_have_count(0, timeout=SEEN)
