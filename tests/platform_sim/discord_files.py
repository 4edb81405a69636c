"""Files on the Discord simulator: the attachment CDN and multipart message uploads.

CDN: every attachment (a user's or the bot's) is a :class:`CdnFile` served at its signed
URL ``{sim.url}/attachments/{channel}/{attachment}/{filename}?ex=<hex expiry>&is=<hex
issued>&hm=<hex signature>&`` (and the same path under ``/media`` for ``proxy_url``), as
``cdn.discordapp.com`` / ``media.discordapp.net`` serve them since 2024. A URL whose
signature does not match, whose expiry has passed (:meth:`Cdn.expire_links` moves the
CDN's clock past every expiry; ``lifetime = 0`` hands out stale ones), or that names no
attachment is answered as the real CDN answers it: 404 with the text ``This content is no
longer available.`` ``downloads`` counts the bodies served per attachment id;
``break_after(id, n)`` makes the next download stop after ``n`` bytes (the connection
closes mid-body).

Uploads: ``POST /channels/{id}/messages`` as ``multipart/form-data`` with a
``payload_json`` part and ``files[n]`` parts (discord.py sends each as
``application/octet-stream``; Discord infers the type from the name). A file over
``upload_limit`` (10 MiB, the default for bots in a server without boosts) is refused
with Discord's 413 ``{"message": "Request entity too large", "code": 40005}``. Each
uploaded file becomes a :class:`CdnFile` and an entry of the message's ``attachments``.
"""

from __future__ import annotations

import hashlib
import hmac
import mimetypes
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import BodyPartReader, MultipartReader, web

Json = dict[str, Any]
UPLOAD_LIMIT = 10 * 1024 * 1024
"""Bytes per file a bot may upload in a server without boosts (discord.py's
``utils.DEFAULT_FILE_SIZE_LIMIT_BYTES``; Discord's help article 213247207)."""
LINK_LIFETIME = 24 * 3600.0
"""Seconds a signed attachment URL works (Discord: about a day)."""
GONE_TEXT = "This content is no longer available."
IS_VOICE_MESSAGE = 1 << 13
CHUNK = 64 * 1024
_FILE_PART = re.compile(r"^files\[(\d+)\]$")


class EntityTooLarge(Exception):
    """A file part over the upload limit (the REST layer answers 413 / 40005)."""


@dataclass(slots=True)
class CdnFile:
    """One attachment's bytes and what Discord says of it."""

    id: str
    channel_id: str
    filename: str
    data: bytes
    content_type: str | None
    expires: float
    issued: float
    duration_secs: float | None = None
    waveform: str | None = None
    title: str | None = None

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(frozen=True, slots=True)
class Upload:
    """A file a user attaches (``content_type`` None: Discord infers it from the name)."""

    filename: str
    data: bytes
    content_type: str | None = None


@dataclass(frozen=True, slots=True)
class FilePart:
    """One ``files[n]`` part of a multipart upload."""

    index: int
    filename: str
    data: bytes


class Cdn:
    """The attachment store and its signed-URL checks (see the module docstring)."""

    def __init__(self, base_url: Callable[[], str], secret: bytes = b"sim-cdn-secret") -> None:
        self._base_url = base_url
        self._secret = secret
        self.files: dict[str, CdnFile] = {}
        self.downloads: dict[str, int] = {}
        """Bodies served per attachment id."""
        self.upload_limit = UPLOAD_LIMIT
        self.lifetime = LINK_LIFETIME
        """Seconds each new signed URL works (0: stale when handed out)."""
        self.skew = 0.0
        """Seconds the CDN's clock is ahead of real time (:meth:`expire_links`)."""
        self._cuts: dict[str, int] = {}

    def now(self) -> float:
        return time.time() + self.skew

    def add(self, file_id: str, channel_id: str, upload: Upload, **meta: Any) -> CdnFile:
        content_type = upload.content_type or mimetypes.guess_type(upload.filename)[0]
        now = self.now()
        cdn = CdnFile(file_id, channel_id, upload.filename, upload.data, content_type,
                      expires=now + self.lifetime, issued=now, **meta)  # fmt: skip
        self.files[file_id] = cdn
        return cdn

    def expire_links(self) -> None:
        """Every URL handed out so far has expired (the CDN's clock is past them)."""
        self.skew += LINK_LIFETIME + 1

    def break_after(self, file_id: str, size: int) -> None:
        """The next download of ``file_id`` ends after ``size`` bytes (connection closed)."""
        self._cuts[file_id] = size

    def _path(self, cdn: CdnFile) -> str:
        return f"/attachments/{cdn.channel_id}/{cdn.id}/{cdn.filename}"

    def _signature(self, path: str, ex: str, issued: str) -> str:
        return hmac.new(self._secret, f"{path}:{ex}:{issued}".encode(), hashlib.sha256).hexdigest()

    def url(self, cdn: CdnFile, *, proxy: bool = False) -> str:
        path, ex, issued = self._path(cdn), f"{int(cdn.expires):x}", f"{int(cdn.issued):x}"
        host = self._base_url() + ("/media" if proxy else "")
        return f"{host}{path}?ex={ex}&is={issued}&hm={self._signature(path, ex, issued)}&"

    def to_json(self, cdn: CdnFile) -> Json:
        """The attachment object of a message (Discord's field names)."""
        data: Json = {"id": cdn.id, "filename": cdn.filename, "size": cdn.size,
                      "url": self.url(cdn), "proxy_url": self.url(cdn, proxy=True)}  # fmt: skip
        if cdn.content_type is not None:
            data["content_type"] = cdn.content_type
        if cdn.title is not None:
            data["title"] = cdn.title
        if cdn.duration_secs is not None:
            data |= {"duration_secs": cdn.duration_secs, "waveform": cdn.waveform,
                     "flags": 0}  # fmt: skip
        return data

    def of(self, attachment: Json) -> CdnFile:
        """The stored file behind a message's attachment object."""
        return self.files[str(attachment["id"])]

    # serving -------------------------------------------------------------------------------
    def routes(self, app: web.Application) -> None:
        for prefix in ("", "/media"):
            path = prefix + "/attachments/{channel_id}/{attachment_id}/{filename}"
            app.router.add_get(path, self.serve)

    def _valid(self, request: web.Request) -> CdnFile | None:
        cdn = self.files.get(request.match_info["attachment_id"])
        if cdn is None or cdn.channel_id != request.match_info["channel_id"]:
            return None
        if cdn.filename != request.match_info["filename"]:
            return None
        ex, issued, hm = (request.query.get(k, "") for k in ("ex", "is", "hm"))
        expected = self._signature(self._path(cdn), ex, issued)
        if not hmac.compare_digest(hm, expected):
            return None
        try:
            expires = int(ex, 16)
        except ValueError:
            return None
        return cdn if expires > self.now() else None

    async def serve(self, request: web.Request) -> web.StreamResponse:
        cdn = self._valid(request)
        if cdn is None:
            return web.Response(status=404, text=GONE_TEXT)
        response = web.StreamResponse(headers={
            "Content-Type": cdn.content_type or "application/octet-stream",
            "Content-Length": str(cdn.size)})  # fmt: skip
        await response.prepare(request)
        cut = self._cuts.pop(cdn.id, None)
        body = cdn.data if cut is None else cdn.data[:cut]
        for start in range(0, len(body), CHUNK):
            await response.write(body[start : start + CHUNK])
        if cut is not None:
            assert request.transport is not None
            request.transport.close()  # mid-body: the client sees the body cut short
            return response
        self.downloads[cdn.id] = self.downloads.get(cdn.id, 0) + 1
        await response.write_eof()
        return response


async def read_multipart(request: web.Request, limit: int) -> tuple[Json, list[FilePart]]:
    """``payload_json`` and the ``files[n]`` parts of a message upload; a file over
    ``limit`` bytes raises :class:`EntityTooLarge` once the whole body has been read (a
    server that stops reading early resets the connection instead of answering)."""
    reader = await request.multipart()
    payload: Json = {}
    files: list[FilePart] = []
    too_large = False
    while (part := await reader.next()) is not None:
        if isinstance(part, MultipartReader):
            continue
        if part.name == "payload_json":
            payload = await part.json() or {}
            continue
        match = _FILE_PART.match(part.name or "")
        data = await _read_part(part, limit)
        if data is None:
            too_large = True
        elif match is not None:
            files.append(FilePart(int(match.group(1)), part.filename or "file", data))
    if too_large:
        raise EntityTooLarge
    return payload, files


async def _read_part(part: BodyPartReader, limit: int) -> bytes | None:
    """The part's bytes, or None (the rest read and dropped) past ``limit``."""
    kept = bytearray()
    while chunk := await part.read_chunk(CHUNK):
        if len(kept) + len(chunk) > limit:
            while await part.read_chunk(CHUNK):
                pass
            return None
        kept += chunk
    return bytes(kept)
