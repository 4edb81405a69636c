"""Contract test: an interaction's webhook token stops working after ``token_lifetime``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import discord
import pytest
from discord.http import Route

from tests.platform_sim.discord_sim import GENERAL, DiscordSim

BUTTON = [{"type": 1, "components": [{"type": 2, "style": 1, "label": "Go", "custom_id": "go"}]}]


@pytest.fixture
async def http(discord_sim: DiscordSim) -> AsyncIterator[discord.Client]:
    client = discord.Client(intents=discord.Intents.none())
    await client.login(discord_sim.token)
    yield client
    await client.close()


async def test_a_token_past_its_lifetime_is_an_invalid_webhook_token(
    discord_sim: DiscordSim, http: discord.Client
) -> None:
    route = Route("POST", "/channels/{channel_id}/messages", channel_id=GENERAL)
    await http.http.request(route, json={"content": "pick", "components": BUTTON})
    pressed = await discord_sim.press_button(discord_sim.bot_messages(GENERAL)[0], "go")
    callback = Route("POST", "/interactions/{i}/{t}/callback", i=pressed.id, t=pressed.token)
    await http.http.request(callback, json={"type": 6})
    followup = Route("POST", "/webhooks/{a}/{t}", a=discord_sim.app_id, t=pressed.token)
    await http.http.request(followup, json={"content": "in time"})
    discord_sim.token_lifetime = 0.0
    with pytest.raises(discord.HTTPException, match="Invalid Webhook Token") as refused:
        await http.http.request(followup, json={"content": "too late"})
    assert (refused.value.status, refused.value.code) == (401, 50027)
    assert [m.text for m in pressed.followups] == ["in time"]
