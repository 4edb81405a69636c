"""The Telegram adapter's files through the real python-telegram-bot against the simulator:
media normalised into offered attachments, albums folded, downloads streamed, uploads."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from adapters.base import ChatRef, DownloadFailed, InboundEvent, TooLong
from adapters.calls import SendFile
from adapters.telegram import TelegramAdapter
from core.attachments import Attachment, OutgoingFile
from core.store.sqlite import SqliteStore
from tests.platform_sim.telegram_files import MB, Media, png
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.polling import until
from tests.telegram.conftest import AdapterFactory
from tests.telegram.harness import AlbumGate, EventLog

DM = ChatRef("telegram", str(ALICE.id))
FORUM = -100901


# inbound ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "name", "mime", "expected"),
    [
        (
            "document",
            "report.pdf",
            "application/pdf",
            ("document", "report.pdf", "application/pdf"),
        ),
        ("document", "shot.png", "image/png", ("image", "shot.png", "image/png")),
        ("voice", None, None, ("voice", "voice-{uid}.ogg", "audio/ogg")),
        ("audio", "song.mp3", "audio/mpeg", ("audio", "song.mp3", "audio/mpeg")),
        ("audio", None, "audio/mpeg", ("audio", "audio-{uid}.mp3", "audio/mpeg")),
        ("video", "clip.mp4", None, ("video", "clip.mp4", "video/mp4")),
        ("video_note", None, None, ("video", "video-note-{uid}.mp4", "video/mp4")),
        ("animation", "fun.mp4", None, ("video", "fun.mp4", "video/mp4")),
    ],
)
async def test_each_media_kind_is_one_offered_attachment(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog,
    kind: str, name: str | None, mime: str | None, expected: tuple[str, str, str],
) -> None:  # fmt: skip
    said = await telegram_sim.user_sends(ALICE.id, kind, b"12345", name=name, mime=mime)  # type: ignore[arg-type]
    event = await events.next_event()
    (attachment,) = event.attachments
    field = said.raw[kind]
    want_kind, want_name, want_mime = expected
    assert (attachment.kind, attachment.mime) == (want_kind, want_mime)
    assert attachment.name == want_name.format(uid=field["file_unique_id"])
    assert (attachment.source, attachment.size, attachment.saved) == (field["file_id"], 5, False)
    assert (event.kind, event.text) == ("text", "")


async def test_photo_is_its_largest_size_and_its_caption_the_text(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    image = png(8, 6)
    said = await telegram_sim.user_sends(ALICE.id, "photo", image, caption="what is this?")
    event = await events.next_event()
    (photo,) = event.attachments
    largest = said.raw["photo"][-1]
    assert (event.kind, event.text, photo.kind, photo.mime) == (
        "text", "what is this?", "image", "image/jpeg",
    )  # fmt: skip
    assert (photo.source, photo.size) == (largest["file_id"], len(image))
    assert photo.name == f"photo-{largest['file_unique_id']}.jpg"


async def test_a_hostile_file_name_is_shown_harmless(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    hostile = "../../etc/\u202egnp.exe\x00" + "a" * 300 + ".pdf"
    await telegram_sim.user_sends(ALICE.id, "document", b"%PDF", name=hostile)
    (attachment,) = (await events.next_event()).attachments
    assert "/" not in attachment.name and "\u202e" not in attachment.name
    assert "\x00" not in attachment.name and len(attachment.name) <= 120
    assert attachment.name.endswith(".pdf")


async def test_a_caption_that_looks_like_a_command_is_text_and_keeps_the_file(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    await telegram_sim.user_sends(ALICE.id, "document", b"log", name="a.log", caption="/new a.log")
    event = await events.next_event()
    assert (event.kind, event.command, event.text) == ("text", None, "/new a.log")
    assert len(event.attachments) == 1


async def test_a_mention_in_a_caption_addresses_the_bot_in_a_group(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    telegram_sim.add_group(-100700)
    await telegram_sim.user_sends(-100700, "photo", png(), caption="@test_bot look", user=ALICE)
    event = await events.next_event()
    assert (event.chat_type, event.mentioned) == ("group", True)


# albums -------------------------------------------------------------------------------------
async def test_an_album_of_three_photos_is_one_event_and_every_part_settles_with_it(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    gate = AlbumGate()
    adapter = await start_adapter(album_sleep=gate.sleep)
    parts = [Media("photo", png(2, 2)), Media("photo", png(3, 3)), Media("photo", png(4, 4))]
    said = await telegram_sim.user_sends_album(ALICE.id, parts, caption="the three of them")
    await until(lambda: adapter.album_parts_waiting() == 3)
    assert events.events == []
    gate.opened.set()
    event = await events.next_event()
    await adapter.drain()
    assert len(events.events) == 1
    assert (event.text, event.update_id) == ("the three of them", said[0].event_id)
    assert [a.source for a in event.attachments] == [m.raw["photo"][-1]["file_id"] for m in said]
    assert await store.unfinished_inbound("telegram") == []


async def test_an_album_cut_short_by_a_stop_folds_again_after_the_restart(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    gate, gate_after = AlbumGate(), AlbumGate()
    never: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    async def turn_never_ends(event: InboundEvent) -> None:
        event.receipt.follow(never)
        await events(event)

    first = await start_adapter(sink=turn_never_ends, album_sleep=gate.sleep)
    parts = [Media("photo", png(2, 2)), Media("document", b"%PDF", "a.pdf"), Media("photo", png())]
    said = await telegram_sim.user_sends_album(ALICE.id, parts, caption="later")
    await until(lambda: first.album_parts_waiting() == 3)
    gate.opened.set()
    await events.next_event()
    await first.stop()
    assert len(await store.unfinished_inbound("telegram")) == 3
    after = EventLog()
    second = await start_adapter(sink=after, album_sleep=gate_after.sleep)
    await until(lambda: second.album_parts_waiting() == 3)
    gate_after.opened.set()
    replayed = await after.next_event()
    await second.drain()
    assert len(after.events) == 1 and replayed.update_id == said[0].event_id
    assert [a.kind for a in replayed.attachments] == ["image", "document", "image"]
    assert replayed.text == "later" and await store.unfinished_inbound("telegram") == []


# download -----------------------------------------------------------------------------------
async def test_download_streams_the_bytes_in_chunks(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    data = bytes(range(256)) * 1024  # 256 KiB
    await telegram_sim.user_sends(ALICE.id, "document", data, name="big.bin")
    (attachment,) = (await events.next_event()).attachments
    chunks = [chunk async for chunk in adapter.download(attachment)]
    assert b"".join(chunks) == data
    assert len(chunks) > 1 and max(len(c) for c in chunks) <= 64 * 1024
    assert telegram_sim.files.get_file_calls[attachment.source] == 1
    assert telegram_sim.files.downloads[attachment.source] == 1


async def test_a_file_over_20_mb_fails_naming_the_limit_without_a_download(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    await telegram_sim.user_sends(ALICE.id, "video", b"x", name="long.mp4", size=30 * MB)
    (attachment,) = (await events.next_event()).attachments
    assert attachment.size == 30 * MB
    with pytest.raises(DownloadFailed, match="Telegram lets bots download files of at most 20 MB"):
        async for _ in adapter.download(attachment):
            pass
    assert telegram_sim.files.downloads[attachment.source] == 0


async def test_an_invalid_file_id_fails_in_words(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    gone = Attachment("document", "old.pdf", "application/pdf", 10, source="no-such-file")
    with pytest.raises(
        DownloadFailed, match=r"Telegram no longer has this file \(invalid file_id\)"
    ):
        async for _ in adapter.download(gone):
            pass


# upload -------------------------------------------------------------------------------------
def outgoing(tmp_path: Path, name: str, data: bytes, kind: str = "document") -> OutgoingFile:
    path = tmp_path / name
    path.write_bytes(data)
    mime = "image/png" if name.endswith(".png") else "text/plain"
    return OutgoingFile("turn1.f0", str(path), name, mime, len(data), kind, "")  # type: ignore[arg-type]


async def test_send_file_photo_goes_as_a_photo_with_caption_and_topic(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, tmp_path: Path
) -> None:
    telegram_sim.add_group(FORUM, forum=True)
    await telegram_sim.user_says(FORUM, "topic", thread=9)
    image = png(20, 10)
    chat = ChatRef("telegram", str(FORUM), "9")
    file = outgoing(tmp_path, "chart.png", image, "photo")
    sent = await adapter.perform(SendFile(chat, file, "the chart", key=file.key))
    (kept,) = telegram_sim.files.sent
    assert (kept.method, kept.file.data, kept.caption, kept.thread) == (
        "sendPhoto", image, "the chart", 9,
    )  # fmt: skip
    assert sent is not None and sent.message_id == str(kept.message_id)
    assert adapter.capabilities.upload_limit == 50 * MB


async def test_send_file_document_keeps_its_name(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, tmp_path: Path
) -> None:
    telegram_sim.chat(ALICE.id)
    file = outgoing(tmp_path, "notes.txt", b"line 1\n")
    await adapter.perform(SendFile(DM, file, "x" * 1100))
    (kept,) = telegram_sim.files.sent
    assert (kept.method, kept.file.name, kept.file.data) == (
        "sendDocument",
        "notes.txt",
        b"line 1\n",
    )
    assert len(kept.caption) == 1024 and kept.caption.endswith("…")


async def test_a_photo_telegram_refuses_as_a_picture_is_sent_once_as_a_document(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, tmp_path: Path
) -> None:
    telegram_sim.chat(ALICE.id)
    file = outgoing(tmp_path, "strip.png", png(10_001, 1), "photo")
    await adapter.perform(SendFile(DM, file, "wide"))
    assert [c.status for c in telegram_sim.calls_to("sendPhoto")] == [400]
    assert [c.status for c in telegram_sim.calls_to("sendDocument")] == [200]
    (kept,) = telegram_sim.files.sent
    assert (kept.method, kept.file.name, kept.caption) == ("sendDocument", "strip.png", "wide")


async def test_a_file_over_the_upload_limit_is_too_long_naming_it(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, tmp_path: Path
) -> None:
    telegram_sim.chat(ALICE.id)
    telegram_sim.files.upload_limit = 64 * 1024  # the real 50 MB, scaled down for the test
    file = outgoing(tmp_path, "dump.txt", b"x" * (100 * 1024))
    with pytest.raises(TooLong, match=r"dump\.txt is over the 50 MB a Telegram bot may send"):
        await adapter.perform(SendFile(DM, file, ""))
    assert telegram_sim.files.sent == [] and len(telegram_sim.calls_to("sendDocument")) == 1
