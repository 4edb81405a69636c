"""The dashboard's pairing (docs/pairing.md) end to end: the gateway composed by the
wiring from ``[telegram] pairing = true``, the real python-telegram-bot against the
simulator, the dashboard over real HTTP. The waiting stranger is listed (never their
code); Approve lets them in and they are told; only an operator may approve."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from core.model.demo import DemoModel
from core.store.sqlite import SqliteStore
from gateway.inbound.pairing import NOT_OWNER, YOU_ARE_IN
from gateway.web.compose import web_adapter_of
from gateway.wiring import build_service
from tests.platform_sim.telegram_sim import TelegramSim, TgUser
from tests.web.harness import EventStream, Running, close, web_config
from tests.web.test_platform_health import telegram_section

CAROL = TgUser(99, "Carol", "carol")
CODE = re.compile(r"[A-HJ-NP-Z2-9]{4}-[A-HJ-NP-Z2-9]{4}")
GatewayFactory = Callable[..., Awaitable[Running]]


@pytest.fixture
async def gateways(tmp_path: Path, store: SqliteStore) -> AsyncIterator[GatewayFactory]:
    started: list[Running] = []

    async def make(extra: dict[str, Any]) -> Running:
        service = build_service(web_config(tmp_path, extra), store, DemoModel())
        await service.start()
        running = Running(service, web_adapter_of(service), aiohttp.ClientSession(trust_env=False))
        started.append(running)
        return running

    yield make
    for running in reversed(started):
        await close(running)


def pairing_on(sim: TelegramSim, **more: Any) -> dict[str, Any]:
    config = telegram_section(sim)
    config["telegram"].update(pairing=True, pairing_ttl=1800)
    return {**config, **more}


async def code_of(sim: TelegramSim) -> str:
    await sim.user_says(CAROL.id, "hello", user=CAROL)
    message = await sim.wait_for_bot_message(CAROL.id, lambda m: "pairing code" in m.text)
    found = CODE.search(message.text)
    assert found is not None and "30 minutes" in message.text
    return found.group(0)


async def waiting(running: Running) -> list[dict[str, Any]]:
    response = await running.http.get(running.url + "/api/dashboard/events")
    stream = EventStream(response)
    stream.start()
    try:
        frame = await stream.wait_for(
            lambda frames: next((f for f in frames if f.kind == "state"), None)
        )
    finally:
        await stream.close()
    assert frame is not None
    shown: list[dict[str, Any]] = frame.data["pairing"]
    return shown


async def test_the_dashboard_lists_the_stranger_and_approve_lets_them_in(
    gateways: GatewayFactory, telegram_sim: TelegramSim, store: SqliteStore
) -> None:
    running = await gateways(pairing_on(telegram_sim, approvals={"web": ["local"]}))
    code = await code_of(telegram_sim)
    [shown] = await waiting(running)
    assert shown["name"] == "Carol" and shown["user_id"] == str(CAROL.id)
    assert code not in str(shown)
    async with await running.post("/api/dashboard/pair", {"code": code}) as response:
        assert response.status == 200
        assert (await response.json())["message"] == (
            f"✅ Carol (telegram:{CAROL.id}) is in; I told them."
        )
    await telegram_sim.wait_for_bot_message(CAROL.id, lambda m: m.text == YOU_ARE_IN)
    [user] = await store.paired_users("telegram")
    assert user.paired_by == "web:local"
    assert await waiting(running) == []


async def test_only_an_operator_may_approve_on_the_dashboard(
    gateways: GatewayFactory, telegram_sim: TelegramSim, store: SqliteStore
) -> None:
    running = await gateways(pairing_on(telegram_sim))
    code = await code_of(telegram_sim)
    async with await running.post("/api/dashboard/pair", {"code": code}) as response:
        assert response.status == 403 and (await response.json())["error"] == NOT_OWNER
    assert await store.paired_users() == [] and len(await store.pairing_codes()) == 1
