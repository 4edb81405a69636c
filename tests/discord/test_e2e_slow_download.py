"""End to end on Discord: a file server that trickles one byte every 5 s passes every
per-read timeout; the download's total deadline (``[attachments] download_min_seconds``,
``download_min_rate``; here 1 s) gives it up with one readable reply, the message's text
is still answered, and the chat's next message too (its lane is free again)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from tests.discord.conftest import GatewayFactory
from tests.discord.harness import dm_key
from tests.platform_sim import discord_payloads as dp
from tests.platform_sim.discord_sim import ALICE, DiscordSim
from tests.support.model_server import ScriptedModelServer, reply_text

SIZE = 1000
DEADLINE = {"download_min_seconds": 1.0, "download_min_rate": 1_000_000}


class TricklingFiles:
    """A 127.0.0.1 file server that sends one byte of a :data:`SIZE`-byte file every 5 s."""

    def __init__(self) -> None:
        self.closing = asyncio.Event()
        self.started = asyncio.Event()
        self.url = ""

    async def serve(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.content_length = SIZE
        await response.prepare(request)
        self.started.set()
        for _ in range(SIZE):
            await response.write(b"x")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.closing.wait(), 5.0)
            if self.closing.is_set():
                break
        return response


@pytest.fixture
async def trickling() -> AsyncIterator[TricklingFiles]:
    files = TricklingFiles()
    app = web.Application()
    app.router.add_get("/attachments/{name}", files.serve)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    files.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield files
    finally:
        files.closing.set()
        await runner.cleanup()


async def test_a_trickled_download_is_given_up_at_its_deadline_and_the_chat_goes_on(
    gateway: GatewayFactory,
    discord_sim: DiscordSim,
    model_server: ScriptedModelServer,
    trickling: TricklingFiles,
) -> None:
    model_server.script(reply_text("Noted your words."), reply_text("Hello again."))
    run = await gateway(attachments=DEADLINE)
    dm = discord_sim.dm_channel(ALICE)
    url = f"{trickling.url}/attachments/log.txt"
    attachment = {"id": discord_sim.snowflake(), "filename": "log.txt", "size": SIZE,
                  "url": url, "proxy_url": url, "content_type": "text/plain"}  # fmt: skip
    raw = dp.message_json(discord_sim.snowflake(), dm, ALICE, "see the log",
                          attachments=[attachment])  # fmt: skip
    discord_sim.store(raw)
    await discord_sim.echo("MESSAGE_CREATE", raw, from_user=True)

    notice = await discord_sim.wait_for_bot_message(dm, lambda m: "log.txt" in m.text)
    assert "could not be downloaded" in notice.text and "within 1 s" in notice.text
    assert trickling.started.is_set()
    await discord_sim.wait_for_bot_message(dm, lambda m: "Noted your words" in m.text)
    await discord_sim.user_says(dm, "hi again")
    await discord_sim.wait_for_bot_message(dm, lambda m: "Hello again" in m.text)
    await run.idle(dm_key(dm.id))
    notices = [m for m in discord_sim.bot_messages(dm) if "log.txt" in m.text]
    assert len(notices) == 1
