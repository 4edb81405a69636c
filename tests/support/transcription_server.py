"""A scripted OpenAI-compatible transcription server for tests.

``ScriptedTranscriptionServer`` is an aiohttp server on ``127.0.0.1:<free port>`` in the
caller's event loop, built like :mod:`tests.support.model_server`. It speaks
``POST /v1/audio/transcriptions`` (``multipart/form-data``), answers each request with the
next scripted :class:`TranscriptionReply`, and records every request as an
:class:`ReceivedUpload`::

    async with ScriptedTranscriptionServer() as server:
        server.script(transcript("turn the lights off"), error(503, OPENAI_TOO_LARGE))
        config = TranscriptionConfig(base_url=server.url)        # server.url ends in /v1
        ...
        upload = server.uploads[0]          # .fields (model, response_format, language),
        upload.file_name, upload.file_type  # .file_size, .file_sha256, .file_bytes,
        upload.authorization                # the Authorization header ("" if none)

Replies: ``transcript(text)`` (OpenAI's ``{"text": ...}``), ``error(status, body)`` with a
recorded body from :mod:`tests.support.transcription_wire`, ``raw(text, status=...,
content_type=...)`` (non-JSON), ``hang()`` (holds the answer until the server stops or
``server.release()``: the client's timeout), ``drop()`` (reads the request, then closes the
connection without an answer). Each takes ``headers={...}`` (e.g. ``Retry-After``). When
the script is used up, ``server.default`` answers; if that is ``None`` the request gets
HTTP 500 naming the problem and ``server.unscripted`` counts it.

The file part is read in chunks as it arrives (never the whole body at once); its bytes
are kept in ``file_bytes`` only up to ``keep_bytes`` (default 1 MiB), its size and sha256
always. ``await server.wait_for_uploads(n)`` waits for ``n`` requests (event-driven).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from aiohttp import BodyPartReader, hdrs, web

_log = logging.getLogger(__name__)

PATH = "/v1/audio/transcriptions"


@dataclass(frozen=True)
class TranscriptionReply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    hold: bool = False
    drop: bool = False


def transcript(text: str, *, headers: dict[str, str] | None = None) -> TranscriptionReply:
    """A successful ``response_format=json`` answer: ``{"text": text}``."""
    return json_reply({"text": text}, headers=headers)


def json_reply(
    body: Any, status: int = 200, *, headers: dict[str, str] | None = None
) -> TranscriptionReply:
    return TranscriptionReply(status, json.dumps(body).encode(), headers=headers or {})


def error(status: int, body: Any, *, headers: dict[str, str] | None = None) -> TranscriptionReply:
    """An error answer with a (recorded) JSON body."""
    return json_reply(body, status, headers=headers)


def raw(text: str, *, status: int = 200, content_type: str = "text/html") -> TranscriptionReply:
    return TranscriptionReply(status, text.encode(), content_type)


def hang() -> TranscriptionReply:
    """No answer until the server stops or ``release()`` (then a plain transcript)."""
    return TranscriptionReply(body=b'{"text": "late"}', hold=True)


def drop() -> TranscriptionReply:
    """Read the request, then close the connection without answering."""
    return TranscriptionReply(drop=True)


@dataclass
class ReceivedUpload:
    index: int
    path: str
    headers: dict[str, str]
    fields: dict[str, str] = field(default_factory=dict)
    file_name: str | None = None
    file_type: str | None = None
    file_size: int = 0
    file_sha256: str = ""
    file_bytes: bytes = b""
    file_chunks: int = 0

    @property
    def authorization(self) -> str:
        return self.headers.get("Authorization", "")

    @property
    def model(self) -> str | None:
        return self.fields.get("model")


class ScriptedTranscriptionServer:
    """Answers transcription requests from a script; see the module docstring."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, keep_bytes: int = 1 << 20):
        self._host = host
        self._port = port
        self._keep = keep_bytes
        self._script: list[TranscriptionReply] = []
        self._runner: web.AppRunner | None = None
        self._arrived = asyncio.Condition()
        self._released = asyncio.Event()
        self._stopping = asyncio.Event()
        self.default: TranscriptionReply | None = None
        self.uploads: list[ReceivedUpload] = []
        self.unscripted = 0

    async def start(self) -> ScriptedTranscriptionServer:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_post(PATH, self._transcribe)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        self._port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> ScriptedTranscriptionServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        """The OpenAI-style base URL, e.g. ``http://127.0.0.1:41234/v1``."""
        return f"http://{self._host}:{self._port}/v1"

    def script(self, *replies: TranscriptionReply) -> ScriptedTranscriptionServer:
        self._script.extend(replies)
        return self

    def release(self) -> None:
        self._released.set()

    async def wait_for_uploads(self, count: int, timeout: float = 5.0) -> list[ReceivedUpload]:
        async with self._arrived:
            try:
                await asyncio.wait_for(
                    self._arrived.wait_for(lambda: len(self.uploads) >= count), timeout
                )
            except TimeoutError:
                raise TimeoutError(
                    f"transcription server got {len(self.uploads)} of {count} requests"
                ) from None
        return self.uploads[:count]

    # handler -------------------------------------------------------------------------------

    async def _transcribe(self, request: web.Request) -> web.StreamResponse:
        upload = await self._record(request)
        reply = self._next(upload)
        if reply.hold:
            await self._hold()
        if reply.drop and request.transport is not None:
            request.transport.abort()  # no answer at all, like a crashed server
            return web.Response()
        return web.Response(
            status=reply.status,
            body=reply.body,
            content_type=reply.content_type,
            headers=reply.headers,
        )

    async def _record(self, request: web.Request) -> ReceivedUpload:
        upload = ReceivedUpload(len(self.uploads), request.path, dict(request.headers))
        if request.content_type == "multipart/form-data":
            reader = await request.multipart()
            async for part in reader:
                if isinstance(part, BodyPartReader):
                    await self._read_part(part, upload)
        async with self._arrived:
            self.uploads.append(upload)
            self._arrived.notify_all()
        return upload

    async def _read_part(self, part: BodyPartReader, upload: ReceivedUpload) -> None:
        if part.filename is None:
            upload.fields[part.name or ""] = await part.text()
            return
        upload.file_name = part.filename
        upload.file_type = part.headers.get(hdrs.CONTENT_TYPE)
        digest = hashlib.sha256()
        kept = bytearray()
        while chunk := await part.read_chunk():
            upload.file_size += len(chunk)
            upload.file_chunks += 1
            digest.update(chunk)
            if len(kept) < self._keep:
                kept += chunk[: self._keep - len(kept)]
        upload.file_sha256 = digest.hexdigest()
        upload.file_bytes = bytes(kept)

    def _next(self, upload: ReceivedUpload) -> TranscriptionReply:
        if self._script:
            return self._script.pop(0)
        if self.default is not None:
            return self.default
        self.unscripted += 1
        _log.error("transcription server: no reply scripted for request #%d", upload.index)
        return error(500, {"error": {"message": f"no reply scripted for #{upload.index}"}})

    async def _hold(self) -> None:
        waits = {
            asyncio.ensure_future(self._released.wait()),
            asyncio.ensure_future(self._stopping.wait()),
        }
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
