"""Files on the Telegram simulator: media users send, ``getFile``, the download route, and
the bot's multipart uploads (``sendPhoto`` / ``sendDocument``).

Every file lives in ``sim.files`` (:class:`FileStore`) under its ``file_id``, with the
``file_path`` ``getFile`` hands out (``photos/file_3.jpg``, ``documents/file_4.pdf``,
``voice/file_5.oga``, ...) and the bytes the download route
``/file/bot<token>/<file_path>`` serves. As on Telegram, each size of a photo is a file of
its own (a thumbnail's bytes differ from the original's).

Acting as a user (each returns the user's :class:`SimMessage`; ``event_id`` its update)::

    await sim.user_sends(ALICE.id, "photo", PNG, caption="what is this?")
    await sim.user_sends(ALICE.id, "document", b"%PDF-1.7 ...", name="report.pdf",
                         mime="application/pdf")
    await sim.user_sends(ALICE.id, "voice", OGG)      # also audio, video, video_note, animation
    await sim.user_sends(ALICE.id, "document", b"x", name="big.bin", size=25 * MB)  # declared
    await sim.user_sends_album(ALICE.id, [Media("photo", A), Media("photo", B)], caption="c")

``size`` declares a file bigger than its bytes, so a test sees Telegram's refusal of a
file over the bots' 20 MB download limit without holding 20 MB. An album's parts share a
``media_group_id`` and are queued together (one getUpdates batch).

What is enforced, with the Bot API's own texts: ``getFile`` of an unknown id →
400 "Bad Request: invalid file_id"; of a file over ``download_limit`` (20 MB) →
400 "Bad Request: file is too big"; a download path nobody was given → 404; an upload over
``upload_limit`` (50 MB) → 413 "Request Entity Too Large" (the body is read as it comes,
never past the limit); a photo that is no PNG/JPEG/GIF → 400 "Bad Request:
IMAGE_PROCESS_FAILED"; one whose width + height exceeds 10000 or whose sides differ by
more than 20 times → 400 "Bad Request: PHOTO_INVALID_DIMENSIONS".

For the tests: ``sim.files.get_file_calls[file_id]`` and ``sim.files.downloads[file_id]``
count each file's ``getFile`` calls and downloads; ``sim.files.sent`` lists what the bot
uploaded (:class:`SentFile`: chat, method, bytes, name, caption, thread);
``sim.hold_next("download")`` streams the first half of the next download and then holds
the rest until released (a download in flight for a crash test).
"""

from __future__ import annotations

import itertools
import struct
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from aiohttp import BodyPartReader, web

from tests.platform_sim.base import Json
from tests.platform_sim.telegram_types import TgApiError, TgUser, Upload, bad_request

if TYPE_CHECKING:
    from tests.platform_sim.telegram_sim import TelegramSim

MB = 1024 * 1024
DOWNLOAD_LIMIT = 20 * MB
"""What a bot may download (core.telegram.org/bots/api#getfile)."""
UPLOAD_LIMIT = 50 * MB
"""What a bot may upload with multipart/form-data (core.telegram.org/bots/api#sending-files)."""
PHOTO_SIDES = 10_000
PHOTO_RATIO = 20
CHUNK = 64 * 1024
TOO_LARGE = "Request Entity Too Large"

MediaKind = Literal["photo", "document", "voice", "audio", "video", "video_note", "animation"]
FOLDERS: dict[str, tuple[str, str, str]] = {
    # kind: (file_path folder, extension, default MIME type)
    "photo": ("photos", "jpg", "image/jpeg"),
    "document": ("documents", "", "application/octet-stream"),
    "voice": ("voice", "oga", "audio/ogg"),
    "audio": ("music", "mp3", "audio/mpeg"),
    "video": ("videos", "mp4", "video/mp4"),
    "video_note": ("video_notes", "mp4", "video/mp4"),
    "animation": ("animations", "mp4", "video/mp4"),
}
PHOTO_SIZES = (90, 320, 800)
"""The thumbnail widths Telegram makes of a photo, besides the original."""


@dataclass(slots=True)
class SimFile:
    """One file Telegram keeps: what getFile says of it and the bytes a download gets."""

    file_id: str
    unique_id: str
    path: str
    data: bytes
    mime: str
    name: str | None = None
    declared: int | None = None
    """The size Telegram reports when a test declared one bigger than ``data``."""

    @property
    def size(self) -> int:
        return self.declared if self.declared is not None else len(self.data)


@dataclass(frozen=True, slots=True)
class Media:
    """One file a user sends (``user_sends`` / an album part)."""

    kind: MediaKind
    data: bytes
    name: str | None = None
    mime: str | None = None
    size: int | None = None
    caption: str | None = None


@dataclass(frozen=True, slots=True)
class SentFile:
    """A file the bot uploaded (sendPhoto / sendDocument) that Telegram accepted."""

    chat_id: int
    method: str
    file: SimFile
    caption: str
    thread: int | None
    message_id: int


@dataclass(slots=True)
class FileStore:
    """Every file of the simulated Telegram, with the counters the tests read."""

    download_limit: int = DOWNLOAD_LIMIT
    upload_limit: int = UPLOAD_LIMIT
    by_id: dict[str, SimFile] = field(default_factory=dict)
    get_file_calls: Counter[str] = field(default_factory=Counter)
    downloads: Counter[str] = field(default_factory=Counter)
    sent: list[SentFile] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def add(
        self, kind: str, data: bytes, *, name: str | None = None, mime: str | None = None,
        size: int | None = None,
    ) -> SimFile:  # fmt: skip
        """Keep a new file of ``kind`` (its folder and extension follow the kind)."""
        n = next(self._ids)
        folder, ext, default_mime = FOLDERS[kind]
        ext = ext or (name.rpartition(".")[2] if name and "." in name else "bin")
        file = SimFile(f"AgAD{kind[:3]}{n:04d}", f"AQAD{n:04d}", f"{folder}/file_{n}.{ext}",
                       data, mime or default_mime, name, size)  # fmt: skip
        self.by_id[file.file_id] = file
        return file

    def by_path(self, path: str) -> SimFile | None:
        return next((f for f in self.by_id.values() if f.path == path), None)

    def __contains__(self, file_id: object) -> bool:
        return file_id in self.by_id

    def __getitem__(self, file_id: str) -> SimFile:
        return self.by_id[file_id]


# what the user sends ------------------------------------------------------------------------
def media_json(files: FileStore, media: Media) -> Json:
    """The message fields of ``media`` (its files kept in ``files``)."""
    if media.kind == "photo":
        return {"photo": _photo_sizes(files, media)}
    file = files.add(media.kind, media.data, name=media.name, mime=media.mime, size=media.size)
    base: Json = {"file_id": file.file_id, "file_unique_id": file.unique_id,
                  "file_size": file.size}  # fmt: skip
    if media.kind in ("voice", "audio", "video", "video_note", "animation"):
        base["duration"] = 3
    if media.kind in ("video", "animation"):
        base |= {"width": 640, "height": 360}
    if media.kind == "video_note":
        return {"video_note": base | {"length": 240}}  # a video note has no name nor MIME type
    base["mime_type"] = file.mime
    if media.name is not None and media.kind != "voice":
        base["file_name"] = media.name
    if media.kind == "animation":  # "for backward compatibility" the document is set too
        return {"animation": base, "document": dict(base)}
    return {media.kind: base}


def _photo_sizes(files: FileStore, media: Media) -> list[Json]:
    """Telegram's sizes of one photo, smallest first; each is a file of its own and the
    last is the original (the bytes sent)."""
    sizes: list[Json] = []
    for width in PHOTO_SIZES:
        thumb = files.add("photo", f"thumbnail {width}px of {len(media.data)} bytes".encode())
        sizes.append(_photo_size(thumb, width, width * 3 // 4))
    original = files.add("photo", media.data, mime=media.mime, size=media.size)
    sizes.append(_photo_size(original, 1280, 960))
    return sizes


def _photo_size(file: SimFile, width: int, height: int) -> Json:
    return {"file_id": file.file_id, "file_unique_id": file.unique_id, "file_size": file.size,
            "width": width, "height": height}  # fmt: skip


def media_message(
    sim: TelegramSim, chat_id: int, sender: TgUser, media: Media, group: str | None = None,
    caption_entities: list[Json] | None = None,
) -> Json:  # fmt: skip
    """Wire JSON of a user's message carrying ``media`` (caption and album id included)."""
    raw = sim.new_message(sim.chat(chat_id), sender, "")
    del raw["text"]
    raw |= media_json(sim.files, media)
    if media.caption:
        raw["caption"] = media.caption
        if caption_entities:
            raw["caption_entities"] = caption_entities
    if group is not None:
        raw["media_group_id"] = group
    return raw


# getFile and the download route -------------------------------------------------------------
async def get_file(sim: TelegramSim, p: Json) -> Json:
    file_id = str(p.get("file_id", ""))
    sim.files.get_file_calls[file_id] += 1
    if file_id not in sim.files:
        raise bad_request("invalid file_id")
    file = sim.files[file_id]
    if file.size > sim.files.download_limit:
        raise bad_request("file is too big")
    return {"file_id": file.file_id, "file_unique_id": file.unique_id, "file_size": file.size,
            "file_path": file.path}  # fmt: skip


async def download(sim: TelegramSim, request: web.Request) -> web.StreamResponse:
    """``GET /file/bot<token>/<file_path>``: the bytes, in chunks; a held download sends
    its first half and waits (``sim.hold_next("download")``)."""
    file = sim.files.by_path(request.match_info["path"])
    if request.match_info["token"] != sim.token or file is None:
        return web.json_response({"ok": False, "error_code": 404, "description": "Not Found"},
                                 status=404)  # fmt: skip
    sim.files.downloads[file.file_id] += 1
    sim.record("download", {"file_id": file.file_id, "file_path": file.path}, request.method)
    await sim.changed()
    response = web.StreamResponse(headers={"Content-Type": file.mime})
    response.content_length = len(file.data)
    await response.prepare(request)
    half = len(file.data) // 2
    await _write(response, file.data[:half])
    await sim.held("download", {"file_id": file.file_id})
    await _write(response, file.data[half:])
    await response.write_eof()
    return response


async def _write(response: web.StreamResponse, data: bytes) -> None:
    for start in range(0, len(data), CHUNK):
        await response.write(data[start : start + CHUNK])


# uploads -----------------------------------------------------------------------------------
async def read_multipart(request: web.Request, limit: int) -> Json:
    """A multipart form's fields, its files as :class:`Upload`-like parts; over ``limit``
    bytes in all → 413 (Telegram's own answer), without reading the rest."""
    params: Json = {}
    total = 0
    reader = await request.multipart()
    async for part in reader:
        if not isinstance(part, BodyPartReader) or part.name is None:
            continue
        data = bytearray()
        while chunk := await part.read_chunk(CHUNK):
            total += len(chunk)
            if total <= limit:  # past it, read on (the client is still sending) and drop
                data += chunk
        if total > limit:
            continue
        if part.filename is not None:
            mime = part.headers.get("Content-Type", "application/octet-stream")
            params[part.name] = Upload(part.filename, mime, bytes(data))
        else:
            params[part.name] = data.decode()
    if total > limit:
        raise TgApiError(413, TOO_LARGE)
    return params


def check_photo(data: bytes) -> None:
    """Telegram's checks of a photo upload: an image it can read, within its dimensions."""
    size = image_size(data)
    if size is None:
        raise bad_request("IMAGE_PROCESS_FAILED")
    width, height = size
    ratio = max(width, height) / max(min(width, height), 1)
    if width + height > PHOTO_SIDES or ratio > PHOTO_RATIO:
        raise bad_request("PHOTO_INVALID_DIMENSIONS")


def image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height of a PNG, GIF or JPEG from its header; None for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return int(width), int(height)
    if data.startswith(b"\xff\xd8"):
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 < len(data) and data[at] == 0xFF:
        marker, length = data[at + 1], int.from_bytes(data[at + 2 : at + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return int(width), int(height)
        at += 2 + length
    return None


def keep_upload(
    sim: TelegramSim, method: str, chat_id: int, upload: Any, caption: str, thread: int | None,
    message_id: int,
) -> SimFile:  # fmt: skip
    """Keep an accepted upload as a file (getFile and downloads serve it) and in ``sent``."""
    kind = "photo" if method == "sendPhoto" else "document"
    file = sim.files.add(kind, upload.data, name=upload.filename, mime=upload.content_type)
    sim.files.sent.append(SentFile(chat_id, method, file, caption, thread, message_id))
    return file


def png(width: int = 4, height: int = 3) -> bytes:
    """A real PNG of ``width`` x ``height`` grey pixels (test data any image reader takes)."""
    row = b"\x00" + b"\x80\x80\x80" * width
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + b"".join(
        _chunk(kind, body)
        for kind, body in (
            (b"IHDR", header),
            (b"IDAT", zlib.compress(row * height)),
            (b"IEND", b""),
        )
    )


def _chunk(kind: bytes, body: bytes) -> bytes:
    crc = zlib.crc32(kind + body) & 0xFFFFFFFF
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)
