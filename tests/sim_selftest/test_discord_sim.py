"""Contract tests: the real discord.py against the Discord simulator."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import discord
import pytest
from discord import app_commands
from discord.http import Route

from tests.platform_sim.base import SimError
from tests.platform_sim.discord_sim import ALICE, BOB, GENERAL, Bucket, DiscordSim


def all_intents(content: bool = True) -> discord.Intents:
    intents = discord.Intents.default()
    intents.message_content = content
    return intents


@asynccontextmanager
async def running_client(
    sim: DiscordSim, client: discord.Client | None = None
) -> AsyncIterator[discord.Client]:
    client = client or discord.Client(intents=all_intents(), guild_ready_timeout=0.05)
    await client.login(sim.token)
    task = asyncio.create_task(client.connect(reconnect=False))
    try:
        await asyncio.wait_for(client.wait_until_ready(), 5)
        yield client
    finally:
        await client.close()
        await task


@pytest.fixture
async def http(discord_sim: DiscordSim) -> AsyncIterator[discord.Client]:
    """A logged-in client without a gateway connection, for REST-only checks."""
    client = discord.Client(intents=all_intents())
    await client.login(discord_sim.token)
    yield client
    await client.close()


def post(path: str, **params: Any) -> Route:
    return Route("POST", path, **params)


def contents(client: discord.Client) -> asyncio.Queue[str]:
    """A queue of the content of every message the client receives."""
    seen: asyncio.Queue[str] = asyncio.Queue()

    @client.event
    async def on_message(message: discord.Message) -> None:
        seen.put_nowait(message.content)

    return seen


class Approve(discord.ui.View):
    def __init__(self) -> None:
        super().__init__(timeout=None)

    @discord.ui.button(label="Approve", custom_id="approve:1", style=discord.ButtonStyle.success)
    async def approve(self, interaction: discord.Interaction, _: discord.ui.Button[Any]) -> None:
        await interaction.response.edit_message(content=f"approved by {interaction.user.name}",
                                                view=None)  # fmt: skip


# the library contract ---------------------------------------------------------------------------
async def test_client_gets_ready_replies_with_button_and_edits_on_click(
    discord_sim: DiscordSim,
) -> None:
    client = discord.Client(intents=all_intents(), guild_ready_timeout=0.05)
    replied = asyncio.Event()

    @client.event
    async def on_message(message: discord.Message) -> None:
        if message.author == client.user:
            return
        await message.channel.send(f"echo: {message.content}", view=Approve())
        replied.set()  # the view is registered once send() returns

    async with running_client(discord_sim, client):
        assert [g.name for g in client.guilds] == ["Test Guild"]
        await discord_sim.user_says(GENERAL, "hi")
        await asyncio.wait_for(replied.wait(), 5)
        reply = await discord_sim.wait_for_bot_message(GENERAL)
        interaction = await discord_sim.press_button(reply, "approve:1", user=BOB)
        await discord_sim.wait_for(lambda: reply.text == "approved by bob")
    assert interaction.responses[0]["type"] == 7
    assert [v["content"] for v in reply.history] == ["echo: hi"]
    assert reply.buttons == []
    assert discord_sim.gateway.identify is not None
    assert discord_sim.gateway.identify["intents"] & (1 << 15)
    assert discord_sim.gateway.heartbeats >= 1  # sent at once after HELLO, ACKed


async def test_deferred_click_edits_original_and_sends_followup(discord_sim: DiscordSim) -> None:
    class Deferred(discord.ui.View):
        @discord.ui.button(label="Go", custom_id="go")
        async def go(self, interaction: discord.Interaction, _: discord.ui.Button[Any]) -> None:
            await interaction.response.defer()
            await interaction.edit_original_response(content="working")
            await interaction.followup.send("done")

    async with running_client(discord_sim) as client:
        channel = client.get_channel(int(GENERAL))
        assert isinstance(channel, discord.TextChannel)
        await channel.send("start", view=Deferred(timeout=None))
        prompt = await discord_sim.wait_for_bot_message(GENERAL)
        await discord_sim.press_button(prompt, "go")
        await discord_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "done")
    assert prompt.text == "working"
    assert [c.method for c in discord_sim.calls[-3:]] == [
        "interaction_callback", "webhook_edit_original", "webhook_followup"
    ]  # fmt: skip


async def test_bot_receives_its_own_messages_back(discord_sim: DiscordSim) -> None:
    client = discord.Client(intents=all_intents(), guild_ready_timeout=0.05)
    authors: asyncio.Queue[discord.abc.User] = asyncio.Queue()

    @client.event
    async def on_message(message: discord.Message) -> None:
        authors.put_nowait(message.author)

    async with running_client(discord_sim, client):
        channel = client.get_channel(int(GENERAL))
        assert isinstance(channel, discord.TextChannel)
        await channel.send("mine")
        assert await asyncio.wait_for(authors.get(), 5) == client.user


async def test_content_is_blank_without_the_message_content_intent(
    discord_sim: DiscordSim,
) -> None:
    client = discord.Client(intents=all_intents(content=False), guild_ready_timeout=0.05)
    seen = contents(client)
    async with running_client(discord_sim, client):
        await discord_sim.user_says(GENERAL, "secret")
        await discord_sim.user_says(GENERAL, f"{discord_sim.mention} hello")
        await discord_sim.user_says(discord_sim.dm_channel(ALICE).id, "in a DM")
        got = [await asyncio.wait_for(seen.get(), 5) for _ in range(3)]
    assert got == ["", f"{discord_sim.mention} hello", "in a DM"]


async def test_privileged_intent_not_enabled_is_refused(discord_sim: DiscordSim) -> None:
    discord_sim.privileged_intents = 0
    client = discord.Client(intents=all_intents())
    await client.login(discord_sim.token)
    with pytest.raises(discord.ConnectionClosed) as caught:
        await asyncio.wait_for(client.connect(reconnect=False), 5)
    assert caught.value.code == 4014
    await client.close()


async def test_reconnect_resumes_the_session(discord_sim: DiscordSim) -> None:
    client = discord.Client(intents=all_intents(), guild_ready_timeout=0.05)
    seen = contents(client)
    async with running_client(discord_sim, client):
        assert await discord_sim.drop_connection("reconnect") == 1
        await discord_sim.wait_for(lambda: discord_sim.gateway.resumes)
        await discord_sim.user_says(GENERAL, "after resume")
        assert await asyncio.wait_for(seen.get(), 5) == "after resume"
    assert discord_sim.gateway.resumes[0]["session_id"] == "session-1"
    assert len(discord_sim.gateway.sessions) == 1


class QuickReidentify(discord.Client):
    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """discord.py waits 5 s before identifying again; tests need not."""


async def test_gateway_close_makes_the_client_resume(discord_sim: DiscordSim) -> None:
    client = discord.Client(intents=all_intents(), guild_ready_timeout=0.05)
    seen = contents(client)
    async with running_client(discord_sim, client):
        assert await discord_sim.drop_connection("close") == 1
        await discord_sim.wait_for(lambda: discord_sim.gateway.resumes)
        await discord_sim.user_says(GENERAL, "back")
        assert await asyncio.wait_for(seen.get(), 5) == "back"


async def test_guild_messages_need_the_guild_messages_intent(discord_sim: DiscordSim) -> None:
    intents = discord.Intents.none()
    intents.guilds = intents.dm_messages = intents.message_content = True
    client = discord.Client(intents=intents, guild_ready_timeout=0.05)
    seen = contents(client)
    async with running_client(discord_sim, client):
        await discord_sim.user_says(GENERAL, "in the guild")
        await discord_sim.user_says(discord_sim.dm_channel(ALICE).id, "in a DM")
        assert await asyncio.wait_for(seen.get(), 5) == "in a DM"
    assert seen.empty()


async def test_invalid_session_makes_the_client_identify_again(discord_sim: DiscordSim) -> None:
    client = QuickReidentify(intents=all_intents(), guild_ready_timeout=0.05)
    async with running_client(discord_sim, client):
        await discord_sim.drop_connection("invalid_session")
        await discord_sim.wait_for(lambda: "session-1" not in discord_sim.gateway.sessions
                                   and discord_sim.gateway.sessions)  # fmt: skip
    assert discord_sim.gateway.resumes == []


async def test_thread_creation_and_messages_in_it_reach_the_client(
    discord_sim: DiscordSim,
) -> None:
    client = discord.Client(intents=all_intents(), guild_ready_timeout=0.05)
    channels: asyncio.Queue[Any] = asyncio.Queue()

    @client.event
    async def on_message(message: discord.Message) -> None:
        channels.put_nowait(message.channel)

    async with running_client(discord_sim, client):
        thread = await discord_sim.add_thread(GENERAL, "task 1")
        await discord_sim.user_says(GENERAL, "in thread", thread=thread)
        where = await asyncio.wait_for(channels.get(), 5)
        assert isinstance(where, discord.Thread)
        assert where.parent_id == int(GENERAL)
        await where.send("reply in thread")
    assert [m.text for m in discord_sim.bot_messages(thread)] == ["reply in thread"]


async def test_reply_references_the_users_message(discord_sim: DiscordSim) -> None:
    client = discord.Client(intents=all_intents(), guild_ready_timeout=0.05)

    @client.event
    async def on_message(message: discord.Message) -> None:
        if message.author != client.user:
            await message.reply("answer")

    async with running_client(discord_sim, client):
        said = await discord_sim.user_says(GENERAL, "question")
        reply = await discord_sim.wait_for_bot_message(GENERAL)
    assert reply.raw["message_reference"]["message_id"] == said.id
    assert reply.raw["referenced_message"]["content"] == "question"


async def test_bot_can_open_a_dm_and_write_there(discord_sim: DiscordSim) -> None:
    async with running_client(discord_sim) as client:
        alice = await client.fetch_user(int(ALICE.id))
        await alice.send("private hello")
    dm = discord_sim.dm_channel(ALICE)
    assert [m.text for m in discord_sim.bot_messages(dm)] == ["private hello"]


async def test_typing_and_deletes_are_recorded(discord_sim: DiscordSim) -> None:
    async with running_client(discord_sim) as client:
        channel = client.get_channel(int(GENERAL))
        assert isinstance(channel, discord.TextChannel)
        await channel.typing()
        sent = await channel.send("temp")
        await sent.delete()
    assert len(discord_sim.typing(GENERAL)) == 1
    assert discord_sim.bot_messages(GENERAL)[0].deleted


async def test_slash_command_synced_by_the_tree_can_be_used(discord_sim: DiscordSim) -> None:
    client = discord.Client(intents=all_intents(), guild_ready_timeout=0.05)
    tree = app_commands.CommandTree(client)

    @tree.command(name="stop", description="Stop the current turn")
    async def stop(interaction: discord.Interaction) -> None:
        await interaction.response.send_message("stopped")

    async with running_client(discord_sim, client):
        synced = await tree.sync()
        used = await discord_sim.use_command(GENERAL, "stop")
        reply = await discord_sim.wait_for_bot_message(GENERAL)
    assert [c.name for c in synced] == ["stop"]
    assert [c["name"] for c in discord_sim.commands["global"]] == ["stop"]
    assert (reply.text, used.original) == ("stopped", reply)


async def test_unregistered_slash_command_cannot_be_used(discord_sim: DiscordSim) -> None:
    with pytest.raises(ValueError, match="no application command 'stop'"):
        await discord_sim.use_command(GENERAL, "stop")


# limits -----------------------------------------------------------------------------------------
async def test_content_over_2000_chars_is_rejected(http: discord.Client) -> None:
    route = post("/channels/{channel_id}/messages", channel_id=GENERAL)
    with pytest.raises(discord.HTTPException, match="Must be 2000 or fewer") as caught:
        await http.http.request(route, json={"content": "x" * 2001})
    assert (caught.value.status, caught.value.code) == (400, 50035)


async def test_empty_message_is_rejected(http: discord.Client) -> None:
    route = post("/channels/{channel_id}/messages", channel_id=GENERAL)
    with pytest.raises(discord.HTTPException, match="Cannot send an empty message"):
        await http.http.request(route, json={"content": ""})


@pytest.mark.parametrize(
    ("rows", "error"),
    [
        ([[{"custom_id": "x" * 101}]], "components.0.components.0.custom_id"),
        ([[{"custom_id": f"b{i}"}] for i in range(6)], "Must be 5 or fewer in length"),
        ([[{"custom_id": f"b{i}"} for i in range(6)]], "components.0.components"),
        ([[{"custom_id": "same"}, {"custom_id": "same"}]], "custom id cannot be duplicated"),
        ([[{"custom_id": "x", "label": "y" * 81}]], "Must be 80 or fewer"),
    ],
)
async def test_component_limits_are_enforced(
    http: discord.Client, rows: list[list[dict[str, str]]], error: str
) -> None:
    components = [{"type": 1, "components": [{"type": 2, "style": 1, "label": "b", **b}
                                             for b in row]} for row in rows]  # fmt: skip
    route = post("/channels/{channel_id}/messages", channel_id=GENERAL)
    with pytest.raises(discord.HTTPException, match=error):
        await http.http.request(route, json={"content": "x", "components": components})


async def test_editing_a_users_message_is_forbidden(
    discord_sim: DiscordSim, http: discord.Client
) -> None:
    said = await discord_sim.user_says(GENERAL, "mine")
    route = Route("PATCH", "/channels/{c}/messages/{m}", c=GENERAL, m=said.id)
    with pytest.raises(discord.Forbidden, match="authored by another user"):
        await http.http.request(route, json={"content": "edited"})


async def test_interaction_is_answered_once_within_its_window(
    discord_sim: DiscordSim, http: discord.Client
) -> None:
    components = [{"type": 1, "components": [{"type": 2, "style": 1, "label": "Go",
                                              "custom_id": "go"}]}]  # fmt: skip
    route = post("/channels/{channel_id}/messages", channel_id=GENERAL)
    await http.http.request(route, json={"content": "pick", "components": components})
    prompt = discord_sim.bot_messages(GENERAL)[0]
    first = await discord_sim.press_button(prompt, "go")
    callback = post("/interactions/{i}/{t}/callback", i=first.id, t=first.token)
    await http.http.request(callback, json={"type": 6})
    with pytest.raises(discord.HTTPException, match="already been acknowledged"):
        await http.http.request(callback, json={"type": 6})
    discord_sim.interaction_window = 0.0
    late = await discord_sim.press_button(prompt, "go")
    with pytest.raises(discord.NotFound, match="Unknown interaction"):
        await http.http.request(post("/interactions/{i}/{t}/callback", i=late.id, t=late.token),
                                json={"type": 6})  # fmt: skip


async def test_unknown_channel_and_message_are_not_found(
    discord_sim: DiscordSim, http: discord.Client
) -> None:
    with pytest.raises(discord.NotFound, match="Unknown Channel"):
        await http.http.send_message(999, params=_params("x"))
    route = Route("PATCH", "/channels/{c}/messages/{m}", c=GENERAL, m="123")
    with pytest.raises(discord.NotFound, match="Unknown Message"):
        await http.http.request(route, json={"content": "x"})


async def test_followup_before_any_response_is_unknown_webhook(
    discord_sim: DiscordSim, http: discord.Client
) -> None:
    components = [{"type": 1, "components": [{"type": 2, "style": 1, "label": "Go",
                                              "custom_id": "go"}]}]  # fmt: skip
    route = post("/channels/{channel_id}/messages", channel_id=GENERAL)
    await http.http.request(route, json={"content": "pick", "components": components})
    pressed = await discord_sim.press_button(discord_sim.bot_messages(GENERAL)[0], "go")
    followup = post("/webhooks/{a}/{t}", a=discord_sim.app_id, t=pressed.token)
    with pytest.raises(discord.NotFound, match="Unknown Webhook"):
        await http.http.request(followup, json={"content": "too early"})


# faults -----------------------------------------------------------------------------------------
async def test_rate_limit_is_waited_out_by_discord_py(
    discord_sim: DiscordSim, http: discord.Client
) -> None:
    discord_sim.fail_next("create_message", SimError.rate_limit(0.1))
    await http.http.send_message(int(GENERAL), params=_params("after 429"))
    assert [c.status for c in discord_sim.calls_to("create_message")] == [429, 200]


async def test_route_bucket_answers_429_when_exhausted(
    discord_sim: DiscordSim, http: discord.Client
) -> None:
    discord_sim.bucket = Bucket(limit=2, window=0.5)
    for text in ("1", "2", "3"):
        await http.http.send_message(int(GENERAL), params=_params(text))
    assert [c.status for c in discord_sim.calls_to("create_message")] == [200, 200, 429, 200]
    assert [m.text for m in discord_sim.bot_messages(GENERAL)] == ["1", "2", "3"]


@pytest.mark.parametrize(
    ("error", "raised", "text"),
    [
        (SimError.forbidden(), discord.Forbidden, "Missing Access"),
        (SimError.not_found(10003), discord.NotFound, "404 Not Found"),
        (SimError.platform(50013, 403), discord.Forbidden, "error code: 50013"),
    ],
)
async def test_injected_fault_reaches_discord_py_as_its_exception(
    discord_sim: DiscordSim, http: discord.Client, error: SimError, raised: type[Exception],
    text: str,
) -> None:  # fmt: skip
    discord_sim.fail_next("create_message", error)
    with pytest.raises(raised, match=text):
        await http.http.send_message(int(GENERAL), params=_params("x"))


async def test_bad_token_fails_login(discord_sim: DiscordSim) -> None:
    client = discord.Client(intents=all_intents())
    with pytest.raises(discord.LoginFailure):
        await client.login("WRONG")
    await client.close()


def _params(content: str) -> Any:
    from discord.http import handle_message_parameters

    return handle_message_parameters(content=content)
