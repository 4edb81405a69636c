"""The Discord adapter's files through the real discord.py against the simulator: a
message's attachments offered with their kind, streamed from the CDN, and files uploaded
once per outbox key (adapters/discord/files.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.base import ChatRef, DownloadFailed, InboundEvent, TooLong
from adapters.calls import SendFile
from adapters.discord.adapter import DiscordAdapter, DiscordSettings
from adapters.discord.normalize import Envelope
from core.attachments import Attachment, OutgoingFile
from core.store.sqlite import SqliteStore
from tests.platform_sim.discord_sim import ALICE, GENERAL, DiscordSim, Upload

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
TIMEOUT = 5.0


class Running:
    """An adapter started on the simulator, and the events it handed on."""

    def __init__(self, adapter: DiscordAdapter) -> None:
        self.adapter = adapter
        self.events: asyncio.Queue[InboundEvent] = asyncio.Queue()

    async def sink(self, event: InboundEvent) -> None:
        self.events.put_nowait(event)

    async def next_event(self) -> InboundEvent:
        return await asyncio.wait_for(self.events.get(), TIMEOUT)

    async def fetch(self, attachment: Attachment) -> list[bytes]:
        return [chunk async for chunk in self.adapter.download(attachment)]


@pytest.fixture
async def running(discord_sim: DiscordSim, store: SqliteStore) -> AsyncIterator[Running]:
    # the adapter is ready once every guild arrived; discord.py's own READY, 2 s later,
    # is cancelled by stop (a shorter delay could fire while the client closes)
    settings = DiscordSettings(api_base=discord_sim.api_base, gateway_url=discord_sim.gateway_url)
    run = Running(DiscordAdapter(discord_sim.token, store, settings))
    await run.adapter.start(run.sink)
    try:
        yield run
    finally:
        await run.adapter.stop()


async def offered(running: Running, sim: DiscordSim, *files: Upload) -> InboundEvent:
    await sim.user_says(sim.dm_channel(ALICE), "", files=files)
    return await running.next_event()


def outgoing(path: Path, key: str, name: str = "report.png") -> OutgoingFile:
    return OutgoingFile(key, str(path), name, "image/png", path.stat().st_size, "photo")


async def test_each_attachment_is_offered_with_its_kind_from_the_content_type(
    running: Running, discord_sim: DiscordSim
) -> None:
    event = await offered(
        running, discord_sim, Upload("shot.png", PNG), Upload("song.mp3", b"ID3"),
        Upload("clip.mp4", b"mp4"), Upload("paper.pdf", b"%PDF"),
        Upload("log", b"x", "text/plain; charset=utf-8"), Upload("blob.zzq", b"?"),
    )  # fmt: skip
    assert event.kind == "text" and event.text == ""  # files without text: still a message
    kinds = [(a.kind, a.name, a.mime, a.size) for a in event.attachments]
    assert kinds == [("image", "shot.png", "image/png", len(PNG)),
                     ("audio", "song.mp3", "audio/mpeg", 3), ("video", "clip.mp4", "video/mp4", 3),
                     ("document", "paper.pdf", "application/pdf", 4),
                     ("document", "log", "text/plain", 1),
                     ("document", "blob.zzq", "application/octet-stream", 1)]  # fmt: skip
    raw = discord_sim.messages(discord_sim.dm_channel(ALICE))[0].raw["attachments"]
    assert [a.source for a in event.attachments] == [a["url"] for a in raw]
    assert not any(a.saved for a in event.attachments)


async def test_a_voice_message_is_offered_as_voice_and_its_caption_kept(
    running: Running, discord_sim: DiscordSim
) -> None:
    await discord_sim.user_voice_message(discord_sim.dm_channel(ALICE), b"OggS-hello")
    event = await running.next_event()
    (voice,) = event.attachments
    assert (voice.kind, voice.name, voice.mime) == ("voice", "voice-message.ogg", "audio/ogg")
    captioned = await offered(running, discord_sim, Upload("memo.ogg", b"OggS", "audio/ogg"))
    assert captioned.attachments[0].kind == "audio"  # no voice flag: an audio file


async def test_a_mention_with_only_a_file_opens_a_thread_and_keeps_the_file(
    running: Running, discord_sim: DiscordSim
) -> None:
    await discord_sim.user_says(GENERAL, discord_sim.mention, files=[Upload("a.png", PNG)])
    event = await running.next_event()
    assert event.chat_type == "thread" and event.chat.chat_id != GENERAL
    assert [a.name for a in event.attachments] == ["a.png"]


async def test_download_streams_the_bytes_in_chunks_from_the_cdn(
    running: Running, discord_sim: DiscordSim
) -> None:
    data = bytes(range(256)) * 1000  # 256 kB: several chunks
    event = await offered(running, discord_sim, Upload("big.bin", data))
    chunks = await running.fetch(event.attachments[0])
    assert len(chunks) > 1 and b"".join(chunks) == data
    assert list(discord_sim.cdn.downloads.values()) == [1]


async def test_an_expired_link_is_a_readable_download_failure(
    running: Running, discord_sim: DiscordSim
) -> None:
    event = await offered(running, discord_sim, Upload("old.pdf", b"%PDF"))
    discord_sim.cdn.expire_links()
    with pytest.raises(DownloadFailed, match=r"^Discord no longer has the file \(its link expired"):
        await running.fetch(event.attachments[0])


async def test_a_download_cut_short_is_a_readable_download_failure(
    running: Running, discord_sim: DiscordSim
) -> None:
    event = await offered(running, discord_sim, Upload("cut.bin", bytes(300_000)))
    discord_sim.cdn.break_after(next(iter(discord_sim.cdn.files)), 100_000)
    with pytest.raises(
        DownloadFailed, match=r"^the download from Discord broke off \(RemoteProtocolError\)"
    ):
        await running.fetch(event.attachments[0])


async def test_a_link_off_discords_cdn_is_never_fetched(running: Running) -> None:
    elsewhere = Attachment("document", "x.txt", "text/plain", 1, source="http://192.0.2.1/x")
    with pytest.raises(DownloadFailed, match="not on Discord's CDN"):
        await running.fetch(elsewhere)


async def test_send_file_uploads_the_bytes_with_the_caption_into_the_thread(
    running: Running, discord_sim: DiscordSim, tmp_path: Path
) -> None:
    thread = await discord_sim.add_thread(GENERAL, "work")
    path = tmp_path / "report.png"
    path.write_bytes(PNG)
    call = SendFile(ChatRef("discord", thread.id), outgoing(path, "f-1"), "the *report*", "f-1")
    sent = await running.adapter.perform(call)
    (message,) = discord_sim.bot_messages(thread)
    assert sent is not None and sent.message_id == message.id
    assert message.text == r"the \*report\*"  # plain text, shown as typed
    (attachment,) = message.raw["attachments"]
    assert (attachment["filename"], discord_sim.file_of(attachment).data) == ("report.png", PNG)
    assert running.adapter.capabilities.upload_limit == 10 * 1024 * 1024


async def test_the_same_key_sent_twice_shows_one_message(
    running: Running, discord_sim: DiscordSim, tmp_path: Path
) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"notes")
    dm = discord_sim.dm_channel(ALICE)
    call = SendFile(ChatRef("discord", dm.id), outgoing(path, "f-2", "notes.txt"), "", "f-2")
    first = await running.adapter.perform(call)
    again = await running.adapter.perform(call)  # a resend after a crash: same key
    assert first == again and len(discord_sim.bot_messages(dm)) == 1
    nonces = {c.params["nonce"] for c in discord_sim.calls_to("create_message")}
    assert len(nonces) == 1 and len(discord_sim.cdn.files) == 1


async def test_a_file_discord_refuses_as_too_large_is_too_long(
    running: Running, discord_sim: DiscordSim, tmp_path: Path
) -> None:
    discord_sim.cdn.upload_limit = 100
    path = tmp_path / "big.png"
    path.write_bytes(PNG)
    dm = discord_sim.dm_channel(ALICE)
    with pytest.raises(TooLong, match="over its upload limit"):
        await running.adapter.perform(SendFile(ChatRef("discord", dm.id), outgoing(path, "f-3")))
    assert discord_sim.bot_messages(dm) == []


def test_a_stored_envelope_gives_back_its_attachments() -> None:
    offer = Attachment("image", "a.png", "image/png", 3, source="https://cdn.discordapp.com/x")
    envelope = Envelope("message", "1", "2", "dm", "3", "alice", attachments=(offer,))
    assert Envelope.from_json(envelope.to_json()) == envelope
    assert Envelope.from_json('{"kind": "message", "id": "1", "channel_id": "2", '
                              '"chat_type": "dm", "author_id": "3", "author_name": "a"}'
                              ).attachments == ()  # fmt: skip
