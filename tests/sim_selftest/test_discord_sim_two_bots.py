"""Contract tests: two bots on one Discord simulator, through discord.py's Client."""

from __future__ import annotations

import asyncio

import discord
import pytest

from tests.platform_sim.discord_sim import ALICE, GENERAL, DiscordSim
from tests.sim_selftest.test_discord_sim import running_client

OTHER_TOKEN, OTHER_ID = "OTHER.DISCORD.TOKEN", "801"


def authors(client: discord.Client) -> asyncio.Queue[tuple[str, bool, str]]:
    """``(author id, author.bot, content)`` of every message the client receives."""
    seen: asyncio.Queue[tuple[str, bool, str]] = asyncio.Queue()

    @client.event
    async def on_message(message: discord.Message) -> None:
        seen.put_nowait((str(message.author.id), message.author.bot, message.content))

    return seen


def client() -> discord.Client:
    intents = discord.Intents.default()
    intents.message_content = True
    return discord.Client(intents=intents, guild_ready_timeout=0.05)


@pytest.mark.parametrize("speaker", ["first", "second"])
async def test_each_bots_message_reaches_the_other_with_the_bot_flag(
    discord_sim: DiscordSim, speaker: str
) -> None:
    peer = discord_sim.add_bot(OTHER_TOKEN, OTHER_ID, "other_bot")
    first, second = client(), client()
    first_seen, second_seen = authors(first), authors(second)
    async with running_client(discord_sim, first), running_client(peer, second):
        assert first.user is not None and str(first.user.id) == discord_sim.bot.id
        assert second.user is not None and str(second.user.id) == OTHER_ID
        talker, listener = (first, second_seen) if speaker == "first" else (second, first_seen)
        assert talker.user is not None
        channel = talker.get_channel(int(GENERAL))
        assert isinstance(channel, discord.TextChannel)
        await channel.send(f"hello from {talker.user.name}")
        heard = await asyncio.wait_for(listener.get(), 5)
        assert heard == (str(talker.user.id), True, f"hello from {talker.user.name}")
    view = discord_sim if speaker == "first" else peer
    assert [m.text for m in discord_sim.bot_messages(GENERAL, bot=view.bot)] == [
        f"hello from {view.bot.username}"
    ]


async def test_a_users_message_reaches_both_bots_and_a_wrong_token_neither(
    discord_sim: DiscordSim,
) -> None:
    peer = discord_sim.add_bot(OTHER_TOKEN, OTHER_ID, "other_bot")
    first, second = client(), client()
    first_seen, second_seen = authors(first), authors(second)
    async with running_client(discord_sim, first), running_client(peer, second):
        await discord_sim.user_says(GENERAL, "hi bots", user=ALICE)
        for seen in (first_seen, second_seen):
            assert await asyncio.wait_for(seen.get(), 5) == (ALICE.id, False, "hi bots")
    stranger = discord.Client(intents=discord.Intents.default())
    with pytest.raises(discord.LoginFailure):
        await stranger.login("NOBODY.S.TOKEN")
    await stranger.close()
