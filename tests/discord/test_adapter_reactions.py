"""Status reactions on Discord (``PUT .../reactions/{emoji}/@me``) against the simulator
through discord.py: the event names the user's message — in its own channel, also when its
session moved to a thread started from it — and the bot's reactions land on it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from adapters.base import ChatRef, InboundEvent, SentMessage
from adapters.calls import DONE, FAILED, WORKING, React
from adapters.discord.adapter import DiscordAdapter, DiscordSettings
from core.store.sqlite import SqliteStore
from tests.platform_sim.discord_sim import ALICE, GENERAL, DiscordSim

TIMEOUT = 5.0


@pytest.fixture
async def running(
    discord_sim: DiscordSim, store: SqliteStore
) -> AsyncIterator[tuple[DiscordAdapter, asyncio.Queue[InboundEvent]]]:
    settings = DiscordSettings(api_base=discord_sim.api_base, gateway_url=discord_sim.gateway_url)
    adapter = DiscordAdapter(discord_sim.token, store, settings)
    got: asyncio.Queue[InboundEvent] = asyncio.Queue()

    async def sink(event: InboundEvent) -> None:
        got.put_nowait(event)

    await adapter.start(sink)
    try:
        yield adapter, got
    finally:
        await adapter.stop()


async def test_the_bots_reactions_land_on_the_users_dm_message(
    running: tuple[DiscordAdapter, asyncio.Queue[InboundEvent]], discord_sim: DiscordSim
) -> None:
    adapter, got = running
    dm = discord_sim.dm_channel(ALICE)
    said = await discord_sim.user_says(dm, "hello")
    event = await asyncio.wait_for(got.get(), TIMEOUT)
    assert event.source == SentMessage(ChatRef("discord", dm.id), said.id)
    for emoji in (WORKING, DONE, FAILED):
        await adapter.perform(React(event.source, emoji))
    assert [r["emoji"]["name"] for r in said.raw["reactions"]] == ["👀", "✅", "❌"]


async def test_a_mention_that_opens_a_thread_is_marked_in_its_own_channel(
    running: tuple[DiscordAdapter, asyncio.Queue[InboundEvent]], discord_sim: DiscordSim
) -> None:
    adapter, got = running
    said = await discord_sim.user_says(GENERAL, f"{discord_sim.mention} explain")
    event = await asyncio.wait_for(got.get(), TIMEOUT)
    assert event.chat.chat_id != GENERAL and event.source is not None
    assert event.source == SentMessage(ChatRef("discord", GENERAL), said.id)
    await adapter.perform(React(event.source, WORKING))
    assert [r["emoji"]["name"] for r in said.raw["reactions"]] == ["👀"]
