"""Files in and out of the web chat, over real HTTP against the real web app: uploads
streamed into the conversation's spool and sent as offered attachments, the limit, the
viewer's own uploads only, the spool's lifetime on a test clock, and files the agent sends
served as downloads to their own conversation only (adapters/web/uploads.py, files.py)."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.base import ChatRef, InboundEvent
from adapters.calls import SendFile
from adapters.web.adapter import WebAdapter, WebSettings
from adapters.web.uploads import SENT_TTL, UNSENT_TTL
from core.attachments import Attachment, OutgoingFile
from core.store.sqlite import SqliteStore
from tests.web.harness import new_id

LIMIT = 64 * 1024
ENDLESS_CAP = 1024 * LIMIT
WAIT = 10.0


class WallClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class WebApp:
    adapter: WebAdapter
    http: aiohttp.ClientSession
    spool: Path
    clock: WallClock
    events: list[InboundEvent] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        assert self.adapter.url is not None
        return self.adapter.url.rstrip("/")

    async def sink(self, event: InboundEvent) -> None:
        self.events.append(event)
        event.receipt.settle(True)
        self.arrived.set()

    async def upload(
        self, conversation: str, data: bytes, name: str = "notes.txt", mime: str = "text/plain"
    ) -> aiohttp.ClientResponse:
        form = aiohttp.FormData()
        form.add_field("file", data, filename=name, content_type=mime)
        return await self.http.post(
            f"{self.url}/api/upload", params={"conversation": conversation}, data=form
        )

    async def uploaded(self, conversation: str, data: bytes, **kwargs: Any) -> dict[str, Any]:
        async with await self.upload(conversation, data, **kwargs) as response:
            assert response.status == 201, await response.text()
            answer: dict[str, Any] = await response.json()
            return answer

    async def send(self, conversation: str, text: str, uploads: list[str]) -> Any:
        body = {"conversation": conversation, "id": new_id(), "text": text, "uploads": uploads}
        return await self.http.post(f"{self.url}/api/send", json=body)

    async def next_event(self) -> InboundEvent:
        async with asyncio.timeout(WAIT):
            while not self.events:
                self.arrived.clear()
                await self.arrived.wait()
        return self.events.pop(0)

    def spooled(self) -> list[Path]:
        return sorted(p for p in self.spool.rglob("*") if p.is_file())


@pytest.fixture
async def web(tmp_path: Path, store: SqliteStore) -> AsyncIterator[WebApp]:
    clock = WallClock()
    spool = tmp_path / "spool"
    settings = WebSettings(host="127.0.0.1", port=0)
    adapter = WebAdapter(store, settings, spool_dir=spool, max_upload_bytes=LIMIT, clock=clock)
    http = aiohttp.ClientSession(trust_env=False)
    app = WebApp(adapter, http, spool, clock)
    await adapter.start(app.sink)
    yield app
    await http.close()
    await adapter.stop()


async def _bytes(adapter: WebAdapter, attachment: Attachment) -> bytes:
    return b"".join([chunk async for chunk in adapter.download(attachment)])


async def test_an_upload_sent_with_a_caption_is_an_offered_attachment_of_the_message(
    web: WebApp,
) -> None:
    conversation, content = new_id(), b"line one\nline two\n"
    answer = await web.uploaded(conversation, content, name="notes.txt")
    assert answer["name"] == "notes.txt" and answer["size"] == len(content)
    async with await web.send(conversation, "what is in this file?", [answer["upload"]]) as sent:
        assert sent.status == 202, await sent.text()
    event = await web.next_event()
    assert event.kind == "text" and event.text == "what is in this file?"
    (attachment,) = event.attachments
    assert attachment == Attachment(
        "document", "notes.txt", "text/plain", len(content), source=answer["upload"]
    )
    assert not attachment.saved
    assert await _bytes(web.adapter, attachment) == content
    shown = (await web.adapter.feed(conversation)).messages
    assert [m.get("files") for m in shown.values()] == [[{"name": "notes.txt", "size": 18}]]


async def test_files_without_text_are_a_text_message_and_a_command_with_files_is_not_run(
    web: WebApp,
) -> None:
    conversation = new_id()
    image = await web.uploaded(conversation, b"\x89PNG....", name="shot.png", mime="image/png")
    async with await web.send(conversation, "", [image["upload"]]) as sent:
        assert sent.status == 202
    event = await web.next_event()
    assert (event.kind, event.text) == ("text", "")
    assert [(a.kind, a.mime) for a in event.attachments] == [("image", "image/png")]
    async with await web.send(conversation, "/stop", [image["upload"]]) as sent:
        assert sent.status == 202
    assert (await web.next_event()).kind == "text", "the files are not dropped as a command"


async def test_the_type_is_checked_loosely_and_a_hostile_name_is_neutralised(
    web: WebApp,
) -> None:
    conversation = new_id()
    hostile = "../../etc/\u202egnp.exe\u200b" + "a" * 300 + ".pdf"
    answer = await web.uploaded(conversation, b"%PDF-1.4", name=hostile, mime="not a type")
    assert "/" not in answer["name"] and "\u202e" not in answer["name"]
    assert len(answer["name"]) == 120 and answer["name"].endswith(".pdf")
    async with await web.send(conversation, "read it", [answer["upload"]]) as sent:
        assert sent.status == 202
    (attachment,) = (await web.next_event()).attachments
    assert (attachment.kind, attachment.mime) == ("document", "application/pdf")


async def test_an_upload_over_the_limit_gets_413_naming_it_and_nothing_is_kept(
    web: WebApp,
) -> None:
    async with await web.upload(new_id(), b"x" * (LIMIT + 1)) as response:
        assert response.status == 413
        assert (await response.json()) == {
            "error": "file: larger than the 65536 byte limit (0.0625 MiB)"
        }
    assert web.spooled() == []


async def test_a_chunked_body_past_the_limit_is_refused_before_it_ends(web: WebApp) -> None:
    """The body never ends: a 413 can only come from a server counting it as it arrives.
    (What the client manages to send before it reads the answer depends on the socket
    buffers and the load: only a bound that ends the test is set on it.)"""
    sent = 0
    answered = asyncio.Event()
    boundary = "commonos-test-boundary"

    async def endless() -> AsyncIterator[bytes]:
        nonlocal sent
        yield (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        while not answered.is_set():
            assert sent < ENDLESS_CAP, "the server should have refused the body long ago"
            sent += 16 * 1024
            yield b"x" * (16 * 1024)
            await asyncio.sleep(0)

    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    url = f"{web.url}/api/upload?conversation={new_id()}"
    async with web.http.post(url, data=endless(), headers=headers) as response:
        answered.set()
        assert response.status == 413
        assert "65536 byte limit" in (await response.json())["error"]
    assert sent > LIMIT
    assert web.spooled() == []


async def test_another_conversations_upload_id_is_refused_and_nothing_is_delivered(
    web: WebApp, store: SqliteStore
) -> None:
    owner, other = new_id(), new_id()
    answer = await web.uploaded(owner, b"private")
    async with await web.send(other, "mine now", [answer["upload"]]) as response:
        assert response.status == 404
        error = (await response.json())["error"]
        assert error == f"uploads: no upload {answer['upload']} in this conversation"
    assert await store.unfinished_inbound("web") == []
    assert web.events == []
    assert await web.adapter.feed(other) and not (await web.adapter.feed(other)).messages


async def test_bad_uploads_get_one_readable_error(web: WebApp) -> None:
    async with web.http.post(
        f"{web.url}/api/upload", params={"conversation": new_id()}, json={"a": 1}
    ) as response:
        assert response.status == 400
        assert (await response.json())["error"].startswith("body: expected multipart/form-data")
    async with await web.upload("x", b"data") as response:
        assert response.status == 400
        assert (await response.json())["error"].startswith("conversation: expected")
    async with await web.send(new_id(), "hi", ["../../etc/passwd"]) as response:
        assert response.status == 400
    assert web.spooled() == []


async def test_uploads_follow_the_login_and_cross_site_rules(
    tmp_path: Path, store: SqliteStore
) -> None:
    adapter = WebAdapter(store, WebSettings(port=0, token="s3cret"), spool_dir=tmp_path / "sp")
    app = WebApp(adapter, aiohttp.ClientSession(trust_env=False), tmp_path / "sp", WallClock())
    await adapter.start(app.sink)
    try:
        async with await app.upload(new_id(), b"data") as response:
            assert response.status == 401
        form = aiohttp.FormData()
        form.add_field("file", b"data", filename="a.txt")
        headers = {"Authorization": "Bearer s3cret", "Origin": "https://evil.example"}
        url = f"{app.url}/api/upload?conversation={new_id()}"
        async with app.http.post(url, data=form, headers=headers) as response:
            assert response.status == 403
        assert app.spooled() == []
    finally:
        await app.http.close()
        await adapter.stop()


async def test_an_upload_not_sent_is_removed_after_an_hour_a_sent_one_after_a_day(
    web: WebApp,
) -> None:
    conversation = new_id()
    unsent = await web.uploaded(conversation, b"forgotten")
    sent = await web.uploaded(conversation, b"sent")
    async with await web.send(conversation, "here", [sent["upload"]]) as response:
        assert response.status == 202
    (offered,) = (await web.next_event()).attachments
    web.clock.now += UNSENT_TTL + 1
    web.adapter.sweep()
    assert [p.name for p in web.spooled()] == [sent["upload"], f"{sent['upload']}.json"]
    assert web.adapter.uploads.path_of(unsent["upload"]) is None
    web.clock.now += SENT_TTL
    web.adapter.sweep()
    assert web.spooled() == []
    with pytest.raises(Exception, match="the upload is gone"):
        await _bytes(web.adapter, offered)


def _outgoing(tmp_path: Path, key: str, name: str, data: bytes, mime: str) -> OutgoingFile:
    snapshot = tmp_path / f"snapshot-{key}"
    snapshot.write_bytes(data)
    return OutgoingFile(key, str(snapshot), name, mime, len(data), "document")


async def test_a_sent_file_is_a_link_served_only_to_its_conversation_as_a_download(
    web: WebApp, tmp_path: Path
) -> None:
    conversation, data = new_id(), b"<script>alert(1)</script>"
    file = _outgoing(tmp_path, "k1", 'réport "1".html', data, "text/html")
    call = SendFile(ChatRef("web", conversation), file, "the report", key="k1")
    sent = await web.adapter.perform(call)
    assert sent is not None
    item = (await web.adapter.feed(conversation)).messages[sent.message_id]
    assert item["html"] == "the report"
    link = item["file"]
    assert (link["name"], link["size"], link["image"]) == ('réport "1".html', len(data), False)
    async with web.http.get(web.url + link["url"]) as response:
        assert response.status == 200
        assert await response.read() == data
        assert response.headers["Content-Type"] == "application/octet-stream"
        assert response.headers["Content-Disposition"] == (
            "attachment; filename=\"r_port _1_.html\"; filename*=UTF-8''r%C3%A9port%20%221%22.html"
        )
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert "sandbox" in response.headers["Content-Security-Policy"]
    os.unlink(file.path)  # the link no longer depends on the workspace's snapshot
    async with web.http.get(web.url + link["url"]) as response:
        assert hashlib.sha256(await response.read()).digest() == hashlib.sha256(data).digest()
    path = link["url"].partition("?")[0]
    for query in ({"conversation": new_id()}, {}):
        async with web.http.get(web.url + path, params=query) as response:
            assert response.status == 404


async def test_a_second_send_of_a_key_returns_the_item_already_shown(
    web: WebApp, tmp_path: Path
) -> None:
    conversation = new_id()
    chat = ChatRef("web", conversation)
    file = _outgoing(tmp_path, "k2", "shot.png", b"\x89PNG", "image/png")
    first = await web.adapter.perform(SendFile(chat, file, "", key="k2"))
    again = await web.adapter.perform(SendFile(chat, file, "", key="k2", in_flight_since=1.0))
    other = await web.adapter.perform(SendFile(chat, file, "", key="k3"))
    assert first is not None and again == first and other is not None and other != first
    feed = await web.adapter.feed(conversation)
    assert [m["id"] for m in feed.messages.values()] == [first.message_id, other.message_id]
    assert feed.messages[first.message_id]["file"]["image"] is True
    assert web.adapter.capabilities.upload_limit == 100 * 1024 * 1024
