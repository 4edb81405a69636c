"""Contract tests of the Discord simulator's files: attachments as discord.py parses them,
the signed-URL CDN, and multipart uploads through discord.py's own ``File``."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator

import discord
import httpx
import pytest

from tests.platform_sim.discord_files import GONE_TEXT
from tests.platform_sim.discord_sim import GENERAL, DiscordSim, Upload
from tests.sim_selftest.test_discord_sim import all_intents, running_client

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


@pytest.fixture
async def http(discord_sim: DiscordSim) -> AsyncIterator[discord.Client]:
    """A logged-in client without a gateway connection, for REST-only checks."""
    client = discord.Client(intents=all_intents())
    await client.login(discord_sim.token)
    yield client
    await client.close()


def messages_of(client: discord.Client) -> asyncio.Queue[discord.Message]:
    seen: asyncio.Queue[discord.Message] = asyncio.Queue()

    @client.event
    async def on_message(message: discord.Message) -> None:
        seen.put_nowait(message)

    return seen


async def test_a_users_attachments_reach_discord_py_with_discords_fields(
    discord_sim: DiscordSim,
) -> None:
    async with running_client(discord_sim) as client:
        seen = messages_of(client)
        files = [Upload("shot.png", PNG), Upload("notes", b"x", "text/plain; charset=utf-8")]
        await discord_sim.user_says(GENERAL, "look", files=files)
        message = await asyncio.wait_for(seen.get(), 5)
    shot, notes = message.attachments
    assert (shot.filename, shot.size, shot.content_type) == ("shot.png", len(PNG), "image/png")
    assert "?ex=" in shot.url and "&hm=" in shot.url and "/media/" in shot.proxy_url
    assert notes.content_type == "text/plain; charset=utf-8"
    assert not message.flags.voice and not shot.is_voice_message()


async def test_a_voice_message_has_the_flag_a_duration_and_a_waveform(
    discord_sim: DiscordSim,
) -> None:
    async with running_client(discord_sim) as client:
        seen = messages_of(client)
        await discord_sim.user_voice_message(GENERAL, b"OggS-voice", duration_secs=3.0)
        message = await asyncio.wait_for(seen.get(), 5)
    (voice,) = message.attachments
    assert message.flags.voice and message.content == ""
    assert voice.is_voice_message() and voice.duration == 3.0
    assert (voice.filename, voice.content_type) == ("voice-message.ogg", "audio/ogg")


async def test_the_cdn_serves_the_bytes_at_the_signed_url_and_counts_each_download(
    discord_sim: DiscordSim,
) -> None:
    msg = await discord_sim.user_says(GENERAL, "", files=[Upload("shot.png", PNG)])
    (attachment,) = msg.raw["attachments"]
    async with httpx.AsyncClient() as http:
        first = await http.get(attachment["url"])
        proxied = await http.get(attachment["proxy_url"])
    assert first.status_code == 200 and first.content == PNG
    assert first.headers["content-type"] == "image/png" and proxied.content == PNG
    assert discord_sim.cdn.downloads == {attachment["id"]: 2}


@pytest.mark.parametrize("change", ["expired", "tampered", "unknown"])
async def test_a_bad_or_expired_link_is_404_no_longer_available(
    discord_sim: DiscordSim, change: str
) -> None:
    msg = await discord_sim.user_says(GENERAL, "", files=[Upload("a.pdf", b"%PDF-1.7")])
    (attachment,) = msg.raw["attachments"]
    url = attachment["url"]
    if change == "expired":
        discord_sim.cdn.expire_links()
    elif change == "tampered":
        url = url.replace("hm=", "hm=0")
    else:
        url = url.replace(f"/{attachment['id']}/", "/1234/")
    async with httpx.AsyncClient() as http:
        answer = await http.get(url)
    assert (answer.status_code, answer.text) == (404, GONE_TEXT)
    assert discord_sim.cdn.downloads == {}


async def test_a_broken_download_ends_before_the_declared_length(
    discord_sim: DiscordSim,
) -> None:
    msg = await discord_sim.user_says(GENERAL, "", files=[Upload("a.bin", bytes(200_000))])
    (attachment,) = msg.raw["attachments"]
    discord_sim.cdn.break_after(attachment["id"], 70_000)
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(attachment["url"])
        again = await http.get(attachment["url"])
    assert len(again.content) == 200_000 and discord_sim.cdn.downloads == {attachment["id"]: 1}


async def test_a_file_sent_with_discord_py_keeps_its_name_bytes_and_caption(
    http: discord.Client, discord_sim: DiscordSim
) -> None:
    channel = http.get_partial_messageable(int(GENERAL))
    sent = await channel.send("the report", file=discord.File(io.BytesIO(PNG), "report.png"))
    (stored,) = discord_sim.bot_messages(GENERAL)
    (attachment,) = stored.raw["attachments"]
    assert stored.text == "the report" and sent.attachments[0].filename == "report.png"
    assert attachment["content_type"] == "image/png"
    assert discord_sim.file_of(attachment).data == PNG
    assert discord_sim.calls_to("create_message")[0].params["attachments"][0]["id"] == 0


async def test_the_same_nonce_with_enforce_nonce_makes_one_file_message(
    http: discord.Client, discord_sim: DiscordSim
) -> None:
    channel = http.get_partial_messageable(int(GENERAL))
    first = await channel.send(file=discord.File(io.BytesIO(b"one"), "a.txt"), nonce="k-1")
    again = await channel.send(file=discord.File(io.BytesIO(b"one"), "a.txt"), nonce="k-1")
    assert first.id == again.id and len(discord_sim.bot_messages(GENERAL)) == 1
    assert len(discord_sim.cdn.files) == 1


async def test_a_file_over_the_upload_limit_is_413_request_entity_too_large(
    http: discord.Client, discord_sim: DiscordSim
) -> None:
    discord_sim.cdn.upload_limit = 1000
    channel = http.get_partial_messageable(int(GENERAL))
    with pytest.raises(discord.HTTPException) as refused:
        await channel.send(file=discord.File(io.BytesIO(bytes(1001)), "big.bin"))
    assert (refused.value.status, refused.value.code) == (413, 40005)
    assert refused.value.text == "Request entity too large"
    assert discord_sim.bot_messages(GENERAL) == [] and discord_sim.cdn.files == {}
    fits = await channel.send(file=discord.File(io.BytesIO(bytes(1000)), "fits.bin"))
    assert fits.attachments[0].size == 1000


async def test_attachments_are_blank_without_the_message_content_intent(
    discord_sim: DiscordSim,
) -> None:
    intents = discord.Intents.default()
    intents.message_content = False
    client = discord.Client(intents=intents, guild_ready_timeout=0.05)
    async with running_client(discord_sim, client):
        seen = messages_of(client)
        await discord_sim.user_says(GENERAL, "", files=[Upload("a.png", PNG)])
        message = await asyncio.wait_for(seen.get(), 5)
    assert message.attachments == []
