"""Contract tests: the Discord simulator's channel edit budget (5 edits in any 5 s per
channel), answered over it with Discord's own 429 body and headers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import discord
import pytest

from tests.platform_sim.discord_sim import ALICE, GENERAL, Bucket, DiscordSim
from tests.support.clock import TestClock


@pytest.fixture
async def http(discord_sim: DiscordSim) -> AsyncIterator[discord.Client]:
    client = discord.Client(intents=discord.Intents.none())
    await client.login(discord_sim.token)
    yield client
    await client.close()


@pytest.fixture
def clock(discord_sim: DiscordSim) -> TestClock:
    clock = TestClock()
    discord_sim.clock = clock.now
    return clock


async def edit_raw(sim: DiscordSim, message_id: object, text: str) -> aiohttp.ClientResponse:
    """One PATCH of a message as plain HTTP (discord.py would wait a 429 out)."""
    url = f"{sim.api_base}/channels/{GENERAL}/messages/{message_id}"
    headers = {"Authorization": f"Bot {sim.token}"}
    async with (
        aiohttp.ClientSession() as session,
        session.patch(url, json={"content": text}, headers=headers) as response,
    ):
        await response.read()
        return response


async def test_a_sixth_edit_in_five_seconds_is_refused_with_discords_429(
    discord_sim: DiscordSim, http: discord.Client, clock: TestClock
) -> None:
    sent = await http.http.send_message(int(GENERAL), params=_params("v0"))
    for n in range(1, 6):
        assert (await edit_raw(discord_sim, sent["id"], f"v{n}")).status == 200
    refused = await edit_raw(discord_sim, sent["id"], "v6")
    assert refused.status == 429
    body = await refused.json()
    assert body["message"] == "You are being rate limited."
    assert body["global"] is False and 4.9 < body["retry_after"] <= 5.0
    assert refused.headers["Via"] and refused.headers["X-RateLimit-Remaining"] == "0"
    assert refused.headers["X-RateLimit-Limit"] == "5" and refused.headers["Retry-After"] == "5"
    assert float(refused.headers["X-RateLimit-Reset-After"]) == body["retry_after"]
    assert discord_sim.bot_messages(GENERAL)[0].text == "v5"  # the refused edit not made
    assert discord_sim.edit_limited == 1


async def test_the_budget_is_per_channel_and_frees_as_the_window_slides(
    discord_sim: DiscordSim, http: discord.Client, clock: TestClock
) -> None:
    dm = discord_sim.dm_channel(ALICE)
    here = await http.http.send_message(int(GENERAL), params=_params("g"))
    there = await http.http.send_message(int(dm.id), params=_params("d"))
    for n in range(5):
        await http.http.edit_message(int(GENERAL), int(here["id"]), params=_params(f"g{n}"))
        await http.http.edit_message(int(dm.id), int(there["id"]), params=_params(f"d{n}"))
    clock.skipped += 5.0
    assert (await edit_raw(discord_sim, here["id"], "later")).status == 200
    assert discord_sim.edit_limited == 0


async def test_discord_py_waits_the_edit_429_out_and_retries(
    discord_sim: DiscordSim, http: discord.Client
) -> None:
    discord_sim.edit_limit = Bucket(limit=1, window=0.2)  # on the real clock: a short wait
    sent = await http.http.send_message(int(GENERAL), params=_params("a"))
    await http.http.edit_message(int(GENERAL), int(sent["id"]), params=_params("b"))
    await http.http.edit_message(int(GENERAL), int(sent["id"]), params=_params("c"))
    assert [c.status for c in discord_sim.calls_to("edit_message")] == [200, 429, 200]
    assert discord_sim.bot_messages(GENERAL)[0].text == "c"


def _params(text: str) -> discord.http.MultipartParameters:
    return discord.http.handle_message_parameters(content=text)
