"""Contract tests of the Telegram simulator's files: the real python-telegram-bot reads the
media users send, fetches them with getFile and the download route, and uploads files."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from telegram import Bot, Message
from telegram.error import BadRequest, NetworkError

from tests.platform_sim.telegram_files import MB, Media, png
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.ptb import sim_bot

FORUM = -100900


@pytest.fixture
async def bot(telegram_sim: TelegramSim) -> AsyncIterator[Bot]:
    async with sim_bot(telegram_sim) as b:
        yield b


async def received(bot: Bot, count: int = 1) -> list[Message]:
    updates = await bot.get_updates(timeout=0)
    messages = [u.message for u in updates if u.message is not None]
    assert len(messages) == count
    return messages


async def test_photo_has_every_size_and_the_largest_is_the_original(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    image = png(8, 6)
    said = await telegram_sim.user_sends(ALICE.id, "photo", image, caption="what is /this @x?")
    (message,) = await received(bot)
    assert len(message.photo) == 4 and message.caption == "what is /this @x?"
    assert message.text is None and said.text == "what is /this @x?"
    assert [e.type for e in message.caption_entities] == ["bot_command"]
    largest = max(message.photo, key=lambda p: p.width * p.height)
    data = await (await bot.get_file(largest.file_id)).download_as_bytearray()
    assert bytes(data) == image
    thumb = await (await bot.get_file(message.photo[0].file_id)).download_as_bytearray()
    assert bytes(thumb) != image
    assert telegram_sim.files.get_file_calls[largest.file_id] == 1
    assert telegram_sim.files.downloads[largest.file_id] == 1


async def test_each_media_kind_reads_as_its_own_field(telegram_sim: TelegramSim, bot: Bot) -> None:
    sim = telegram_sim
    await sim.user_sends(ALICE.id, "document", b"%PDF-1.7", name="r.pdf", mime="application/pdf")
    await sim.user_sends(ALICE.id, "voice", b"OggS voice")
    await sim.user_sends(ALICE.id, "audio", b"ID3 song", name="song.mp3")
    await sim.user_sends(ALICE.id, "video", b"mp4 video", name="clip.mp4")
    await sim.user_sends(ALICE.id, "video_note", b"mp4 round")
    await sim.user_sends(ALICE.id, "animation", b"mp4 gif", name="fun.gif.mp4")
    doc, voice, audio, video, note, animation = await received(bot, 6)
    assert doc.document is not None and (doc.document.file_name, doc.document.mime_type) == (
        "r.pdf", "application/pdf",
    )  # fmt: skip
    assert voice.voice is not None and voice.voice.mime_type == "audio/ogg"
    assert audio.audio is not None and audio.audio.file_name == "song.mp3"
    assert video.video is not None and video.video.mime_type == "video/mp4"
    assert note.video_note is not None and note.video_note.length == 240
    assert animation.animation is not None and animation.document is not None
    voice_file = await bot.get_file(voice.voice.file_id)
    assert voice_file.file_path is not None and voice_file.file_path.endswith(".oga")
    assert bytes(await voice_file.download_as_bytearray()) == b"OggS voice"


async def test_album_parts_share_a_media_group_and_arrive_in_one_batch(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    parts = [Media("photo", png(2, 2)), Media("photo", png(3, 3)), Media("photo", png(4, 4))]
    await telegram_sim.user_sends_album(ALICE.id, parts, caption="three")
    messages = await received(bot, 3)
    assert len({m.media_group_id for m in messages}) == 1 and messages[0].media_group_id
    assert [m.caption for m in messages] == ["three", None, None]


async def test_get_file_refuses_an_unknown_id_and_a_file_over_20_mb(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    with pytest.raises(BadRequest, match="Invalid file_id"):
        await bot.get_file("no-such-file")
    await telegram_sim.user_sends(ALICE.id, "document", b"x", name="big.bin", size=25 * MB)
    (message,) = await received(bot)
    assert message.document is not None and message.document.file_size == 25 * MB
    with pytest.raises(BadRequest, match="File is too big"):
        await bot.get_file(message.document.file_id)
    assert telegram_sim.files.get_file_calls[message.document.file_id] == 1
    assert telegram_sim.files.downloads[message.document.file_id] == 0


async def test_download_of_an_unknown_path_or_with_a_wrong_token_is_404(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    said = await telegram_sim.user_sends(ALICE.id, "document", b"abc", name="a.txt")
    path = telegram_sim.files[said.raw["document"]["file_id"]].path
    base = f"{telegram_sim.url}/file/bot"
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"{base}{telegram_sim.token}/documents/nope.txt")).status_code == 404
        assert (await http.get(f"{base}1:WRONG/{path}")).status_code == 404
        assert (await http.get(f"{base}{telegram_sim.token}/{path}")).content == b"abc"


async def test_held_download_sends_its_first_half_then_waits(telegram_sim: TelegramSim) -> None:
    data = bytes(range(256)) * 1024  # 256 KiB: several chunks
    said = await telegram_sim.user_sends(ALICE.id, "document", data, name="d.bin")
    file = telegram_sim.files[said.raw["document"]["file_id"]]
    hold = telegram_sim.hold_next("download")
    got = bytearray()
    async with httpx.AsyncClient() as http:
        url = f"{telegram_sim.url}/file/bot{telegram_sim.token}/{file.path}"
        async with http.stream("GET", url) as response:
            chunks = response.aiter_bytes()
            while len(got) < len(data) // 2:
                got += await anext(chunks)
            assert hold.reached.is_set() and len(got) == len(data) // 2
            hold.release()
            async for chunk in chunks:
                got += chunk
    assert bytes(got) == data and telegram_sim.files.downloads[file.file_id] == 1


async def test_send_photo_keeps_bytes_caption_and_topic(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    telegram_sim.add_group(FORUM, forum=True)
    await telegram_sim.user_says(FORUM, "open topic", thread=7)
    image = png(10, 5)
    sent = await bot.send_photo(FORUM, image, caption="chart", message_thread_id=7,
                                filename="chart.png")  # fmt: skip
    assert sent.photo[-1].width == 10 and sent.caption == "chart"
    (kept,) = telegram_sim.files.sent
    assert (kept.method, kept.file.data, kept.caption, kept.thread) == (
        "sendPhoto", image, "chart", 7,
    )  # fmt: skip
    assert kept.file.name == "chart.png" and kept.message_id == sent.message_id


async def test_send_document_keeps_name_and_mime(telegram_sim: TelegramSim, bot: Bot) -> None:
    telegram_sim.chat(ALICE.id)
    sent = await bot.send_document(ALICE.id, b"a,b\n1,2\n", filename="t.csv", caption="table")
    assert sent.document is not None and sent.document.file_name == "t.csv"
    (kept,) = telegram_sim.files.sent
    assert (kept.method, kept.file.data, kept.caption) == ("sendDocument", b"a,b\n1,2\n", "table")
    assert kept.file.mime == "text/csv"


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (png(10_001, 1), "Photo_invalid_dimensions"),
        (png(2, 50), "Photo_invalid_dimensions"),
        (b"%PDF-1.7 not a picture", "Image_process_failed"),
    ],
)
async def test_send_photo_refuses_what_telegram_cannot_show(
    telegram_sim: TelegramSim, bot: Bot, data: bytes, error: str
) -> None:
    telegram_sim.chat(ALICE.id)
    with pytest.raises(BadRequest, match=error):
        await bot.send_photo(ALICE.id, data)
    assert telegram_sim.files.sent == [] and telegram_sim.bot_messages(ALICE.id) == []


async def test_upload_over_the_limit_is_413(telegram_sim: TelegramSim, bot: Bot) -> None:
    telegram_sim.chat(ALICE.id)
    telegram_sim.files.upload_limit = 64 * 1024  # the real 50 MB, scaled down for the test
    with pytest.raises(NetworkError, match="Request Entity Too Large"):
        await bot.send_document(ALICE.id, b"x" * (200 * 1024), filename="big.bin")
    assert telegram_sim.files.sent == []
    assert telegram_sim.calls_to("sendDocument")[-1].status == 413
    await asyncio.wait_for(bot.send_document(ALICE.id, b"small", filename="s.txt"), 5)
    assert len(telegram_sim.files.sent) == 1
