"""The Slack adapter's files, through the real slack-bolt / slack_sdk (Socket Mode) and
httpx against the simulator: message files become offered attachments of the right kind
(a Slack audio clip a voice note), ``download`` streams ``url_private_download`` with the
bot token and turns Slack's sign-in page into a readable :class:`DownloadFailed`,
``SendFile`` is the v2 external upload into the thread, shown once when it is sent again
after a crash (adapters/slack/files.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.base import ChatRef, DownloadFailed, Forbidden, InboundEvent
from adapters.calls import SendFile
from adapters.slack.adapter import SlackAdapter, SlackSettings
from core.attachments import Attachment, OutgoingFile
from core.store.sqlite import SqliteStore
from tests.platform_sim.base import SimError
from tests.platform_sim.slack_files import SimFile
from tests.platform_sim.slack_sim import ALICE, GENERAL, SlackSim

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 400  # about 100 KiB: two chunks or more


class Running:
    """A started adapter and the events it delivered."""

    def __init__(self, adapter: SlackAdapter) -> None:
        self.adapter = adapter
        self.events: asyncio.Queue[InboundEvent] = asyncio.Queue()

    async def sink(self, event: InboundEvent) -> None:
        self.events.put_nowait(event)

    async def next_event(self) -> InboundEvent:
        return await asyncio.wait_for(self.events.get(), 5)


@pytest.fixture
async def slack(slack_sim: SlackSim, store: SqliteStore) -> AsyncIterator[Running]:
    settings = SlackSettings(api_base_url=slack_sim.api_url, app_token=slack_sim.app_token)
    running = Running(SlackAdapter(slack_sim.bot_token, store, settings))
    await running.adapter.start(running.sink)
    await asyncio.wait_for(running.adapter.health_cell.wait_for(lambda h: h.value.state == "up"), 5)
    try:
        yield running
    finally:
        await running.adapter.stop()


async def shared(
    slack: Running, sim: SlackSim, files: list[SimFile], text: str = ""
) -> InboundEvent:
    await sim.user_shares(GENERAL, files, text)
    return await slack.next_event()


async def fetch(adapter: SlackAdapter, attachment: Attachment) -> list[bytes]:
    return [chunk async for chunk in adapter.download(attachment)]


def outgoing(tmp_path: Path, name: str = "report.pdf", data: bytes = b"%PDF-1.7 x") -> OutgoingFile:
    path = tmp_path / name
    path.write_bytes(data)
    return OutgoingFile(key="file-1", path=str(path), name=name, mime="application/pdf",
                        size=len(data), kind="document")  # fmt: skip


# in --------------------------------------------------------------------------------------------
async def test_message_files_are_offered_attachments_of_their_kind(
    slack: Running, slack_sim: SlackSim
) -> None:
    files = [
        slack_sim.add_file("shot.png", PNG, "image/png"),
        slack_sim.add_file("spec.pdf", b"%PDF", "application/pdf"),
        slack_sim.add_file("notes.txt", b"hello", "text/plain"),
        slack_sim.add_file("demo.mp4", b"mp4", "video/mp4"),
        slack_sim.add_file("song.mp3", b"mp3", "audio/mpeg"),
    ]
    event = await shared(slack, slack_sim, files, "what are these?")
    assert (event.kind, event.text) == ("text", "what are these?")
    got = [(a.kind, a.name, a.mime, a.size) for a in event.attachments]
    assert got == [
        ("image", "shot.png", "image/png", len(PNG)),
        ("document", "spec.pdf", "application/pdf", 4),
        ("document", "notes.txt", "text/plain", 5),
        ("video", "demo.mp4", "video/mp4", 3),
        ("audio", "song.mp3", "audio/mpeg", 3),
    ]
    sources = [a.source for a in event.attachments]
    assert sources == [f.to_json(slack_sim.url)["url_private_download"] for f in files]
    assert all(not a.saved for a in event.attachments)
    assert sum(slack_sim.downloads.values()) == 0  # offered, not fetched


@pytest.mark.parametrize("mime", ["audio/webm", "audio/mp4", "video/mp4"])
async def test_a_slack_audio_clip_is_a_voice_note_with_no_text(
    slack: Running, slack_sim: SlackSim, mime: str
) -> None:
    event = await shared(slack, slack_sim, [slack_sim.audio_clip(b"clip", mimetype=mime)])
    assert (event.kind, event.text, event.command) == ("text", "", None)
    [clip] = event.attachments
    assert clip.kind == "voice" and clip.mime.startswith("audio/")
    assert clip.name.startswith("audio_message.")


async def test_a_caption_that_reads_like_a_command_stays_a_caption(
    slack: Running, slack_sim: SlackSim
) -> None:
    event = await shared(
        slack, slack_sim, [slack_sim.add_file("a.txt", b"a", "text/plain")], "stop"
    )
    assert (event.kind, event.text, len(event.attachments)) == ("text", "stop", 1)


# download --------------------------------------------------------------------------------------
async def test_download_streams_the_file_with_the_bot_token(
    slack: Running, slack_sim: SlackSim
) -> None:
    f = slack_sim.add_file("shot.png", PNG, "image/png")
    [attachment] = (await shared(slack, slack_sim, [f])).attachments
    chunks = await fetch(slack.adapter, attachment)
    assert b"".join(chunks) == PNG and len(chunks) >= 2
    assert slack_sim.downloads[f.id] == 1
    assert [c.params["authorized"] for c in slack_sim.calls_to("files.download")] == [True]


async def test_a_token_without_files_read_gets_a_readable_failure_not_a_login_page(
    slack: Running, slack_sim: SlackSim
) -> None:
    f = slack_sim.add_file("shot.png", PNG, "image/png")
    [attachment] = (await shared(slack, slack_sim, [f])).attachments
    slack_sim.scopes.discard("files:read")
    with pytest.raises(DownloadFailed, match=r"sign-in page.*files:read scope"):
        await fetch(slack.adapter, attachment)
    assert slack_sim.downloads[f.id] == 0 and slack_sim.files.refused == [f.id]


async def test_a_gone_file_a_server_error_and_a_broken_body_fail_readably(
    slack: Running, slack_sim: SlackSim
) -> None:
    f = slack_sim.add_file("shot.png", PNG, "image/png")
    [attachment] = (await shared(slack, slack_sim, [f])).attachments
    del slack_sim.files.by_id[f.id]
    with pytest.raises(DownloadFailed, match="no longer has the file"):
        await fetch(slack.adapter, attachment)
    slack_sim.files.by_id[f.id] = f
    slack_sim.fail_next("files.download", SimError.server_error(503))
    with pytest.raises(DownloadFailed, match="HTTP 503"):
        await fetch(slack.adapter, attachment)
    slack_sim.cut_next_download(70_000)
    with pytest.raises(DownloadFailed, match="connection to Slack broke"):
        await fetch(slack.adapter, attachment)
    assert slack_sim.downloads[f.id] == 0


async def test_the_token_goes_to_slacks_file_hosts_only(
    slack: Running, slack_sim: SlackSim
) -> None:
    elsewhere = Attachment("image", "x.png", "image/png", 3, source="http://127.0.0.2:9/x.png")
    with pytest.raises(DownloadFailed, match="not one of Slack's file hosts"):
        await fetch(slack.adapter, elsewhere)
    assert slack_sim.calls_to("files.download") == []


# upload ----------------------------------------------------------------------------------------
async def test_send_file_is_the_v2_upload_into_the_thread_with_the_caption(
    slack: Running, slack_sim: SlackSim, tmp_path: Path
) -> None:
    parent = await slack_sim.user_says(GENERAL, "the report please")
    chat = ChatRef("slack", GENERAL, parent.id)
    file = outgoing(tmp_path)
    assert slack.adapter.capabilities.upload_limit == 1024**3
    sent = await slack.adapter.perform(SendFile(chat, file, "see <this> & that", key=file.key))
    methods = [c.method for c in slack_sim.calls if c.method.startswith("files.")]
    assert methods == ["files.getUploadURLExternal", "files.upload_url",
                       "files.completeUploadExternal"]  # fmt: skip
    [upload_url] = slack_sim.calls_to("files.getUploadURLExternal")
    assert (upload_url.params["filename"], upload_url.params["length"]) == ("report.pdf", "10")
    [message] = [m for m in slack_sim.bot_messages(GENERAL) if m.raw.get("files")]
    assert (message.thread, message.text) == (parent.id, "see &lt;this&gt; &amp; that")
    [file_json] = message.raw["files"]
    assert sent is not None and sent.message_id == file_json["id"]
    assert (file_json["name"], file_json["size"]) == ("report.pdf", 10)
    assert slack_sim.files.uploaded[0].content == b"%PDF-1.7 x"


async def test_a_file_in_flight_at_a_crash_is_found_and_not_shared_again(
    slack: Running, slack_sim: SlackSim, tmp_path: Path
) -> None:
    parent = await slack_sim.user_says(GENERAL, "the report please")
    chat = ChatRef("slack", GENERAL, parent.id)
    file = outgoing(tmp_path)
    started = time.time()
    first = await slack.adapter.perform(SendFile(chat, file, key=file.key))
    again = await slack.adapter.perform(SendFile(chat, file, key=file.key, in_flight_since=started))
    assert again == first
    assert len(slack_sim.calls_to("files.completeUploadExternal")) == 1
    assert len([m for m in slack_sim.bot_messages(GENERAL) if m.raw.get("files")]) == 1
    lookup = slack_sim.calls_to("conversations.replies")[-1]
    assert lookup.params["ts"] == parent.id


async def test_a_file_in_flight_that_never_arrived_is_uploaded(
    slack: Running, slack_sim: SlackSim, tmp_path: Path
) -> None:
    chat = ChatRef("slack", slack_sim.dm_channel(ALICE), None)
    other = outgoing(tmp_path, "other.pdf")
    await slack.adapter.perform(SendFile(chat, other))  # same conversation, another name
    file = outgoing(tmp_path)
    sent = await slack.adapter.perform(SendFile(chat, file, in_flight_since=time.time() - 5))
    assert slack_sim.calls_to("conversations.history")  # looked up first
    assert len(slack_sim.files.uploaded) == 2
    assert sent is not None and sent.message_id == slack_sim.files.uploaded[1].id


@pytest.mark.parametrize(
    ("setup", "words"),
    [
        ("scope", "lacks the files:write scope"),
        ("disabled", "file uploads are disabled"),
        ("member", "not in this channel"),
    ],
)
async def test_upload_refusals_are_forbidden_in_words(
    slack: Running, slack_sim: SlackSim, tmp_path: Path, setup: str, words: str
) -> None:
    if setup == "scope":
        slack_sim.scopes.discard("files:write")
    elif setup == "disabled":
        slack_sim.uploads_disabled = True
    else:
        slack_sim.channels[GENERAL]["is_member"] = False
    with pytest.raises(Forbidden, match=words):
        await slack.adapter.perform(SendFile(ChatRef("slack", GENERAL, None), outgoing(tmp_path)))
    assert slack_sim.files.uploaded == []
