"""The web chat's HTTP routes: the page, its event stream, uploads, sends, presses, sent
files and the login.

Bad input gets one readable JSON error and changes nothing: 400 for a body that is not
UTF-8 JSON, is nested too deeply to read, or is not an object; 413 for one over the
server's ``client_max_size`` (256 KiB), or an upload over ``max_upload_bytes`` (the error
names the limit; nothing is kept); 404 for an upload id that is not this conversation's
(nothing is delivered) and for a sent file asked for by another conversation. A login is
checked by the gate's throttle (:class:`adapters.web.access.LoginThrottle`): 429 with
``Retry-After`` while the address is locked out. See :mod:`adapters.web.adapter` for what
each route means.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

from aiohttp import BodyPartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from adapters.web.access import LOGIN_PATH, AccessGate, locked_out, login_page
from adapters.web.feed import Feed, FeedEvent
from adapters.web.files import SentFiles, download_headers
from adapters.web.inbox import WebMessage
from adapters.web.sse import HEARTBEAT_FRAME, frame, open_stream, with_heartbeats
from adapters.web.uploads import CHUNK_BYTES, UnknownUpload, UploadSpool, UploadTooLarge
from core.attachments import Attachment

ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{6,64}")
MAX_TEXT = 32_000
MAX_BUTTON_DATA = 256
MAX_UPLOADS = 10
"""Files one message may send."""
STATIC_DIR = Path(__file__).parent / "static"


class BadRequest(ValueError):
    """The request is malformed; the message says how, in one line."""

    status = 400


class TooLarge(BadRequest):
    """The body is over the server's size limit."""

    status = 413


def _id(value: object, what: str) -> str:
    if not isinstance(value, str) or ID_PATTERN.fullmatch(value) is None:
        raise BadRequest(f"{what}: expected 6-64 characters of A-Z a-z 0-9 _ -")
    return value


def _text(value: object, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"{what}: expected non-empty text")
    if len(value) > limit:
        raise BadRequest(f"{what}: longer than {limit} characters")
    return value


async def _json_body(request: web.Request) -> dict[str, Any]:
    """The body as a JSON object (UTF-8, whatever charset the request names)."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise TooLarge("body: too large") from None
    try:
        body = json.loads(raw.decode("utf-8"))
    except ValueError:  # not UTF-8, not JSON, or a number too long to convert
        raise BadRequest("body: expected a JSON object") from None
    except RecursionError:
        raise BadRequest("body: JSON nested too deeply") from None
    if not isinstance(body, dict):
        raise BadRequest("body: expected a JSON object")
    return body


async def _form_token(request: web.Request) -> str:
    """The login form's ``token`` field ("" when there is none)."""
    try:
        form = await request.post()
    except web.HTTPRequestEntityTooLarge:
        raise TooLarge("body: too large") from None
    except (ValueError, LookupError, RuntimeError, HttpProcessingError):
        # a malformed multipart or urlencoded body, an unknown charset or encoding
        raise BadRequest("body: expected a form") from None
    offered = form.get("token")
    return offered if isinstance(offered, str) else ""


class NotFound(BadRequest):
    status = 404


def _uploads(value: object) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_UPLOADS:
        raise BadRequest(f"uploads: expected a list of at most {MAX_UPLOADS} upload ids")
    return [_id(item, "uploads") for item in value]


async def _file_part(request: web.Request) -> BodyPartReader:
    """The upload's file part: the first part of a multipart body."""
    try:
        reader = await request.multipart()
        part = await reader.next()
    except (ValueError, AssertionError, LookupError, HttpProcessingError):
        raise BadRequest("body: expected multipart/form-data with one file") from None
    if not isinstance(part, BodyPartReader) or part.filename is None:
        raise BadRequest("body: expected multipart/form-data with one file")
    return part


async def _chunks(part: BodyPartReader) -> AsyncIterator[bytes]:
    while chunk := await part.read_chunk(CHUNK_BYTES):
        yield chunk


def _bad(exc: BadRequest) -> web.Response:
    return web.json_response({"error": str(exc)}, status=exc.status)


class ChatServer(Protocol):
    """What the routes ask of the web chat they serve (:class:`adapters.web.adapter.WebAdapter`
    is one): its conversations' feeds, uploads and sent files, its access gate, and the
    messages and presses the routes hand it."""

    uploads: UploadSpool
    sent_files: SentFiles
    gate: AccessGate
    closing: asyncio.Event
    """Set when the server stops: open event streams end."""

    async def feed(self, conversation: str) -> Feed: ...

    def claim_uploads(self, conversation: str, upload_ids: list[str]) -> tuple[Attachment, ...]:
        """The offered attachments of this conversation's uploads (:class:`UnknownUpload`
        for an id that is not its)."""
        ...

    async def receive(self, message: WebMessage) -> bool:
        """Deliver a message; False when its id was seen before (a duplicate)."""
        ...

    async def press(self, conversation: str, message_id: str, data: str) -> None: ...


class ChatRoutes:
    def __init__(self, adapter: ChatServer) -> None:
        self.adapter = adapter

    def install(self, app: web.Application) -> None:
        app.router.add_get("/", self.index)
        app.router.add_get("/api/events", self.events)
        app.router.add_post("/api/upload", self.upload)
        app.router.add_post("/api/send", self.send)
        app.router.add_get("/api/files/{file}", self.sent_file)
        app.router.add_post("/api/press", self.press)
        app.router.add_get(LOGIN_PATH, self.login_form)
        app.router.add_post(LOGIN_PATH, self.log_in)

    async def index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    async def events(self, request: web.Request) -> web.StreamResponse:
        try:
            conversation = _id(request.query.get("conversation"), "conversation")
        except BadRequest as exc:
            return _bad(exc)
        feed = await self.adapter.feed(conversation)
        queue = feed.listen()
        # Listening started before the backlog is taken: nothing falls in between.
        last_event_id = request.headers.get("Last-Event-ID")
        backlog = feed.since(last_event_id)
        first: list[FeedEvent] = backlog if backlog is not None else [feed.snapshot()]
        if feed.live or last_event_id:  # the live reply whole (a resumed page may hold a stale one)
            first.append(FeedEvent("live", {"text": feed.live}))
        response = web.StreamResponse()
        try:
            response = await open_stream(request)
            for event in first:
                await response.write(frame(event.kind, event.data, event.id))
            async for event in with_heartbeats(queue, self.adapter.closing):
                data = HEARTBEAT_FRAME if event is None else frame(event.kind, event.data, event.id)
                await response.write(data)
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            feed.unlisten(queue)
        return response

    async def upload(self, request: web.Request) -> web.Response:
        try:
            conversation = _id(request.query.get("conversation"), "conversation")
            part = await _file_part(request)
            upload = await self.adapter.uploads.receive(
                conversation, part.filename or "", part.headers.get("Content-Type", ""),
                _chunks(part),
            )  # fmt: skip
        except BadRequest as exc:
            return _bad(exc)
        except UploadTooLarge as exc:
            return _bad(TooLarge(str(exc)))
        answer = {"upload": upload.id, "name": upload.name, "size": upload.size}
        return web.json_response(answer, status=201)

    async def send(self, request: web.Request) -> web.Response:
        try:
            body = await _json_body(request)
            conversation = _id(body.get("conversation"), "conversation")
            uploads = _uploads(body.get("uploads"))
            text = body.get("text")
            if not (uploads and text in ("", None)):
                text = _text(text, "text", MAX_TEXT)
            attachments = self.adapter.claim_uploads(conversation, uploads)
            message = WebMessage(conversation, _id(body.get("id"), "id"), text or "", attachments)
        except BadRequest as exc:
            return _bad(exc)
        except UnknownUpload as exc:
            return _bad(NotFound(str(exc)))
        accepted = await self.adapter.receive(message)
        return web.json_response({"accepted": accepted, "duplicate": not accepted}, status=202)

    async def press(self, request: web.Request) -> web.Response:
        try:
            body = await _json_body(request)
            conversation = _id(body.get("conversation"), "conversation")
            message = _text(body.get("message"), "message", 128)
            data = _text(body.get("data"), "data", MAX_BUTTON_DATA)
        except BadRequest as exc:
            return _bad(exc)
        await self.adapter.press(conversation, message, data)
        return web.json_response({"pressed": True}, status=202)

    async def sent_file(self, request: web.Request) -> web.StreamResponse:
        """A file the agent sent, to its own conversation's page only (else 404)."""
        conversation = request.query.get("conversation", "")
        sent = None
        if ID_PATTERN.fullmatch(conversation):
            sent = self.adapter.sent_files.find(conversation, request.match_info["file"])
        if sent is None:
            return _bad(NotFound("no such file in this conversation"))
        path = self.adapter.sent_files.path_of(sent)
        return web.FileResponse(path, chunk_size=CHUNK_BYTES, headers=download_headers(sent))

    async def login_form(self, request: web.Request) -> web.Response:
        return login_page()

    async def log_in(self, request: web.Request) -> web.StreamResponse:
        gate = self.adapter.gate
        if gate.token is None:
            raise web.HTTPSeeOther("/")
        try:
            offered = await _form_token(request)
        except BadRequest as exc:
            return _bad(exc)
        attempt = gate.attempt(request, offered)
        if attempt.retry_after:
            return locked_out(request, attempt.retry_after)
        if not attempt.accepted:
            return login_page(status=401, failed=True)
        response = web.Response(status=303, headers={"Location": "/"})
        gate.log_in(response, request)
        return response
