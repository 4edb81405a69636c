"""Webhook mode: updates posted by Telegram with the secret token are stored and delivered;
anything else is refused before it reaches the store."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import ClientSession
from yarl import URL

from adapters.telegram import WebhookSettings
from adapters.telegram.webhook import WebhookServer
from core.store.sqlite import SqliteStore
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.telegram.conftest import AdapterFactory
from tests.telegram.harness import EventLog

SECRET = "s3cret-token"


async def test_webhook_mode_receives_updates_posted_with_the_secret(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    adapter = await start_adapter(webhook=WebhookSettings(secret_token=SECRET, port=0))
    said = await telegram_sim.user_says(ALICE.id, "via webhook")
    assert (await events.next_event()).text == "via webhook"
    await adapter.drain()
    assert telegram_sim.webhook_posts == [(int(said.event_id or 0), 200)]
    record = await store.get_inbound("telegram", said.event_id or "")
    assert record is not None and record.state == "done"


async def test_webhook_refuses_a_post_without_the_secret_token(
    start_adapter: AdapterFactory, store: SqliteStore, events: EventLog
) -> None:
    adapter = await start_adapter(webhook=WebhookSettings(secret_token=SECRET, port=0))
    update = {"update_id": 99, "message": {"message_id": 1, "date": 1700000000,
              "chat": {"id": 42, "type": "private"}, "text": "forged"}}  # fmt: skip
    async with ClientSession() as http:
        for headers in ({}, {"X-Telegram-Bot-Api-Secret-Token": "wrong"}):
            async with http.post(adapter.webhook_url or "", json=update, headers=headers) as r:
                assert r.status == 403
        bad = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
        async with http.post(adapter.webhook_url or "", data=b"not json", headers=bad) as r:
            assert r.status == 400
    assert await store.get_inbound("telegram", "99") is None
    assert events.events == []


async def test_webhook_redelivery_of_a_stored_update_is_not_handled_twice(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, events: EventLog
) -> None:
    adapter = await start_adapter(webhook=WebhookSettings(secret_token=SECRET, port=0))
    said = await telegram_sim.user_says(ALICE.id, "once only")
    await events.next_event()
    update = next(u for u in telegram_sim.updates if u.update_id == int(said.event_id or 0))
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    async with ClientSession() as http:
        body = json.dumps(update.to_json())
        async with http.post(adapter.webhook_url or "", data=body, headers=headers) as r:
            assert r.status == 200
    await adapter.drain()
    assert [e.text for e in events.events] == ["once only"]


def test_webhook_server_refuses_an_empty_secret_token(adapter: Any) -> None:
    with pytest.raises(ValueError, match="secret_token"):
        WebhookServer(adapter.bot, adapter._inbox, WebhookSettings(secret_token=""))


async def test_webhook_keeps_an_unreadable_update_as_a_dead_letter_and_takes_the_next(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    adapter = await start_adapter(webhook=WebhookSettings(secret_token=SECRET, port=0))
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    broken = {"update_id": 77, "message": {"message_id": 5, "text": "no chat"}}
    async with (
        ClientSession() as http,
        http.post(adapter.webhook_url or "", json=broken, headers=headers) as r,
    ):
        assert r.status == 200
    [letter] = await store.list_dead_letters("telegram")
    assert letter.item_id == "77" and "no chat" in letter.raw
    await telegram_sim.user_says(ALICE.id, "after the broken one")
    assert (await events.next_event()).text == "after the broken one"


async def test_webhook_refuses_a_secret_header_that_is_not_utf8(
    start_adapter: AdapterFactory, store: SqliteStore, events: EventLog
) -> None:
    adapter = await start_adapter(webhook=WebhookSettings(secret_token=SECRET, port=0))
    url = URL(adapter.webhook_url or "")
    body = b'{"update_id": 98}'
    request = (
        (
            f"POST {url.path} HTTP/1.1\r\nHost: {url.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n"
        ).encode()
        + b"X-Telegram-Bot-Api-Secret-Token: \xff\xfe"
        + SECRET.encode()
        + b"\r\n\r\n"
    )
    reader, writer = await asyncio.open_connection(url.host, url.port)
    try:
        writer.write(request + body)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 5)
    finally:
        writer.close()
        await writer.wait_closed()
    assert status_line.split()[1] == b"403"
    assert await store.get_inbound("telegram", "98") is None
    assert events.events == []
