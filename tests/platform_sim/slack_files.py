"""Files on the Slack simulator: shared by users, downloaded by the bot, uploaded by it.

User side: ``f = sim.add_file("shot.png", data, "image/png")`` (or ``sim.audio_clip(data)``,
a recorded Slack audio clip: file ``subtype`` ``slack_audio``, ``audio_message.webm``,
``audio/webm``, ``media_display_type`` audio), then ``await sim.user_shares(channel, [f],
text="caption", user=ALICE, thread=ts)`` sends a ``message`` event of subtype
``file_share`` whose ``files`` are Slack file objects (``id``, ``name``, ``title``,
``mimetype``, ``filetype``, ``size``, ``url_private``, ``url_private_download``, ...).

Download (``GET /files-pri/<team>-<file id>/[download/]<name>``, like
``files.slack.com``): only with ``Authorization: Bearer <bot token>`` and the
``files:read`` scope in ``sim.scopes`` is the file served (its MIME type, streamed in
64 KiB chunks) and counted in ``sim.downloads[file_id]``. Without the header, with a wrong
token or without the scope the real Slack answers ``302 Found`` to the workspace's sign-in
page, which is **200 text/html** — the classic pitfall of a client that only checks the
status; the sim does the same (``sim.files.refused`` lists the file ids). Every attempt
is in ``calls`` as method ``files.download`` (``file``, ``authorized``). Faults:
``fail_next("files.download", SimError.server_error(500) | .not_found())``;
``cut_next_download(after)`` ends the next body after ``after`` bytes (a broken connection).

Upload (the v2 external flow): ``files.getUploadURLExternal`` (``filename``, ``length``;
``files:write``) → ``upload_url``, ``file_id``; a ``POST`` of the bytes (raw or multipart)
to ``upload_url`` (no token: the URL is the credential) → ``200 OK - <length>``;
``files.completeUploadExternal`` (``files=[{id, title}]``, ``channel_id``, ``thread_ts``,
``initial_comment``) → the file is shared as a bot message (``files``, ``upload: true``,
text = the comment) in the channel or thread, echoed as an event, and answered with
``files: [{id, title}]`` (Slack names no message ts: the share is asynchronous there).
Errors, Slack's own: ``missing_scope`` (with ``needed``/``provided``),
``file_uploads_disabled`` (``sim.uploads_disabled``), ``missing_argument`` (length 0),
``invalid_arguments``, ``file_not_found`` (unknown or never uploaded id),
``channel_not_found``, ``not_in_channel`` (the channel's ``is_member`` false),
``thread_not_found``. ``sim.uploaded`` lists the completed files (``SimFile`` with bytes).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from aiohttp import web

from tests.platform_sim.base import Json, SimMessage
from tests.platform_sim.slack_sim import APP, BOT_ID, BOT_USER, TEAM, SlackApiFailure
from tests.platform_sim.slack_sim import _rich_text as rich_text

if TYPE_CHECKING:
    from tests.platform_sim.slack_sim import SlackSim, SlackUser

CHUNK = 64 * 1024
LOGIN_PAGE = (
    '<!DOCTYPE html><html lang="en-US"><head><title>Sign in to Sim | Slack</title></head>'
    "<body><h1>Sign in to Sim</h1><p>sim.slack.com</p>"
    '<form action="/signin" method="post"><input name="email"></form></body></html>'
)
DEFAULT_SCOPES = frozenset(
    {"app_mentions:read", "channels:history", "chat:write", "files:read", "files:write",
     "groups:history", "im:history", "reactions:write", "users:read"}
)  # fmt: skip


@dataclass(slots=True)
class SimFile:
    """One file on the simulated Slack."""

    id: str
    name: str
    mimetype: str
    filetype: str
    content: bytes
    user: str
    title: str = ""
    subtype: str | None = None
    """``slack_audio`` / ``slack_video`` for a clip recorded in Slack."""
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def size(self) -> int:
        return len(self.content)

    def to_json(self, base_url: str) -> Json:
        """The file object as message events and history reads carry it."""
        private = f"{base_url}/files-pri/{TEAM}-{self.id}/{quote(self.name)}"
        download = f"{base_url}/files-pri/{TEAM}-{self.id}/download/{quote(self.name)}"
        data: Json = {
            "id": self.id, "created": self.created, "timestamp": self.created,
            "name": self.name, "title": self.title or self.name, "mimetype": self.mimetype,
            "filetype": self.filetype, "pretty_type": self.filetype.upper(),
            "user": self.user, "user_team": TEAM, "editable": False, "size": self.size,
            "mode": "hosted", "is_external": False, "external_type": "", "is_public": False,
            "public_url_shared": False, "display_as_bot": False, "username": "",
            "url_private": private, "url_private_download": download,
            "permalink": f"https://sim.slack.com/files/{self.user}/{self.id}/{self.name}",
            "permalink_public": f"https://slack-files.com/{TEAM}-{self.id}-0000",
            "has_rich_preview": False, "file_access": "visible",
        }  # fmt: skip
        if self.subtype is not None:
            data["subtype"] = self.subtype
            data["media_display_type"] = "audio" if self.subtype == "slack_audio" else "video"
            data["duration_ms"] = 1500
        return data


@dataclass(slots=True)
class PendingUpload:
    """An upload URL handed out by ``files.getUploadURLExternal``."""

    file_id: str
    filename: str
    length: int
    content: bytes | None = None


class SlackFiles:
    """The files state of one :class:`SlackSim` (``sim.files``)."""

    def __init__(self, sim: SlackSim) -> None:
        self.sim = sim
        self.by_id: dict[str, SimFile] = {}
        self.pending: dict[str, PendingUpload] = {}
        self.downloads: Counter[str] = Counter()
        self.refused: list[str] = []
        self.uploaded: list[SimFile] = []
        self.cut_after: int | None = None

    def add(
        self,
        name: str,
        content: bytes,
        mimetype: str,
        *,
        filetype: str | None = None,
        user: str = "U0000ALICE",
        subtype: str | None = None,
        title: str = "",
    ) -> SimFile:
        kind = filetype or (name.rsplit(".", 1)[-1].lower() if "." in name else "binary")
        f = SimFile(f"F{self.sim.next_id():010d}", name, mimetype, kind, content, user,
                    title, subtype)  # fmt: skip
        self.by_id[f.id] = f
        return f

    # download ------------------------------------------------------------------------------
    async def serve(self, request: web.Request) -> web.StreamResponse:
        """``GET /files-pri/<team>-<id>/[download/]<name>``."""
        sim = self.sim
        file_id = request.match_info["ref"].removeprefix(f"{TEAM}-")
        authorized = _bearer(request) == sim.bot_token and "files:read" in sim.scopes
        call = sim.record("files.download", {"file": file_id, "authorized": authorized}, "GET")
        try:
            response = await self._answer(request, file_id, authorized)
        finally:
            await sim.changed()
        call.status = response.status
        return response

    async def _answer(
        self, request: web.Request, file_id: str, authorized: bool
    ) -> web.StreamResponse:
        if not authorized:  # Slack's answer to a browser that is not signed in
            self.refused.append(file_id)
            where = f"/?redir={quote(request.path, safe='')}"
            return web.Response(status=302, text=f'<a href="{where}">Found</a>.',
                                content_type="text/html", headers={"Location": where})  # fmt: skip
        if fault := self.sim.take_fault("files.download"):
            return _html_error(fault.status if fault.kind != "not_found" else 404)
        found = self.by_id.get(file_id)
        if found is None or found.name != request.match_info["name"]:
            return _html_error(404)
        return await self._stream(request, found)

    async def _stream(self, request: web.Request, f: SimFile) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": f.mimetype,
                                               "Content-Length": str(f.size)})  # fmt: skip
        await response.prepare(request)
        cut, self.cut_after = self.cut_after, None
        end = f.size if cut is None else min(cut, f.size)
        for start in range(0, end, CHUNK):
            await response.write(f.content[start : min(start + CHUNK, end)])
        if cut is not None and request.transport is not None:
            request.transport.close()  # the connection breaks mid-body
            return response
        await response.write_eof()
        self.downloads[f.id] += 1
        return response

    # upload --------------------------------------------------------------------------------
    async def receive(self, request: web.Request) -> web.Response:
        """``POST <upload_url>``: the bytes, raw or as a multipart ``file`` field."""
        pending = self.pending.get(request.match_info["upload"])
        sim = self.sim
        call = sim.record("files.upload_url", {"upload": request.match_info["upload"]})
        if pending is None or pending.content is not None:
            call.status = 404
            return web.Response(status=404, text="upload not found")
        pending.content = await _body(request)
        call.params["length"] = len(pending.content)
        call.status = 200
        await sim.changed()
        return web.Response(text=f"OK - {len(pending.content)}")

    def require_scope(self, scope: str) -> None:
        if scope not in self.sim.scopes:
            provided = ",".join(sorted(self.sim.scopes))
            raise SlackApiFailure("missing_scope", needed=scope, provided=provided)


async def user_shares(
    sim: SlackSim,
    channel: str,
    files: list[SimFile],
    *,
    text: str = "",
    user: SlackUser,
    thread: str | None = None,
) -> SimMessage:
    """A user's message with ``files`` (subtype ``file_share``), as Slack delivers it."""
    if channel not in sim.channels:
        raise ValueError(f"unknown channel {channel}")
    raw: Json = {"type": "message", "subtype": "file_share", "user": user.id, "text": text,
                 "ts": sim.new_ts(), "team": TEAM, "upload": False, "display_as_bot": False,
                 "files": [f.to_json(sim.url) for f in files]}  # fmt: skip
    if text:
        raw["blocks"] = rich_text(text)
    if thread is not None:
        raw["thread_ts"] = thread
    msg = sim.store(channel, raw)
    env = await sim.deliver_event(sim.event_of(channel, raw))
    msg.event_id = env.payload["event_id"] if env else None
    return msg


# Web API methods -------------------------------------------------------------------------------
async def files_get_upload_url_external(sim: SlackSim, p: Json) -> Json:
    sim.files.require_scope("files:write")
    if sim.uploads_disabled:
        raise SlackApiFailure("file_uploads_disabled")
    filename, length = str(p.get("filename") or ""), _int(p.get("length"))
    if not filename or length is None:
        raise SlackApiFailure("invalid_arguments")
    if length == 0:
        raise SlackApiFailure("missing_argument")
    file_id = f"F{sim.next_id():010d}"
    upload = f"u{sim.next_id():08d}"
    sim.files.pending[upload] = PendingUpload(file_id, filename, length)
    return {"upload_url": f"{sim.url}/upload/v1/{upload}", "file_id": file_id}


async def files_complete_upload_external(sim: SlackSim, p: Json) -> Json:
    sim.files.require_scope("files:write")
    items = _json_list(p.get("files"))
    if not items:
        raise SlackApiFailure("invalid_arguments")
    uploads = [_uploaded(sim, item) for item in items]
    channel = p.get("channel_id")
    if channel is None:
        return {"files": [{"id": u.id, "title": u.title} for u in uploads]}
    channel = str(channel)
    if channel not in sim.channels:
        raise SlackApiFailure("channel_not_found")
    if not sim.channels[channel].get("is_member", True):
        raise SlackApiFailure("not_in_channel")
    thread = p.get("thread_ts")
    if thread is not None and sim.find_message(channel, str(thread)) is None:
        raise SlackApiFailure("thread_not_found")
    for u in uploads:
        sim.files.by_id[u.id] = u
        sim.files.uploaded.append(u)
    await _share(sim, channel, uploads, str(p.get("initial_comment") or ""), thread)
    return {"files": [{"id": u.id, "title": u.title} for u in uploads]}


def _uploaded(sim: SlackSim, item: Any) -> SimFile:
    file_id = str(item.get("id", "")) if isinstance(item, dict) else ""
    pending = next((u for u in sim.files.pending.values() if u.file_id == file_id), None)
    if pending is None or pending.content is None:
        raise SlackApiFailure("file_not_found")
    name = pending.filename
    kind = name.rsplit(".", 1)[-1].lower() if "." in name else "binary"
    title = str(item.get("title") or name)
    return SimFile(file_id, name, _mime_of(kind), kind, pending.content, BOT_USER, title)


async def _share(
    sim: SlackSim, channel: str, files: list[SimFile], comment: str, thread: Any
) -> None:
    raw: Json = {"type": "message", "user": BOT_USER, "bot_id": BOT_ID, "app_id": APP,
                 "text": comment, "ts": sim.new_ts(), "team": TEAM, "upload": True,
                 "display_as_bot": False,
                 "files": [f.to_json(sim.url) for f in files]}  # fmt: skip
    if thread is not None:
        raw["thread_ts"] = str(thread)
    sim.store(channel, raw)
    await sim.deliver_event(sim.event_of(channel, raw | {"subtype": "file_share"}))


async def files_info(sim: SlackSim, p: Json) -> Json:
    sim.files.require_scope("files:read")
    found = sim.files.by_id.get(str(p.get("file", "")))
    if found is None:
        raise SlackApiFailure("file_not_found")
    return {"file": found.to_json(sim.url)}


METHODS = {
    "files.getUploadURLExternal": files_get_upload_url_external,
    "files.completeUploadExternal": files_complete_upload_external,
    "files.info": files_info,
}


def add_routes(sim: SlackSim, app: web.Application) -> None:
    app.router.add_get("/files-pri/{ref}/download/{name}", sim.files.serve)
    app.router.add_get("/files-pri/{ref}/{name}", sim.files.serve)
    app.router.add_post("/upload/v1/{upload}", sim.files.receive)
    app.router.add_get("/", _login_page)


# helpers -----------------------------------------------------------------------------------------
async def _login_page(request: web.Request) -> web.Response:
    return web.Response(text=LOGIN_PAGE, content_type="text/html")


def _html_error(status: int) -> web.Response:
    title = "File not found" if status == 404 else "Server error"
    return web.Response(status=status, text=f"<html><body><h1>{title}</h1></body></html>",
                        content_type="text/html")  # fmt: skip


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    return header.removeprefix("Bearer ") if header.startswith("Bearer ") else None


async def _body(request: web.Request) -> bytes:
    if request.content_type.startswith("multipart/"):
        reader = await request.multipart()
        async for part in reader:
            if getattr(part, "name", None) in ("file", "filename"):
                return bytes(await part.read())  # type: ignore[union-attr]
        return b""
    return await request.read()


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _json_list(value: Any) -> list[Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return value if isinstance(value, list) else []


MIMES = {"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif",
         "webp": "image/webp", "pdf": "application/pdf", "txt": "text/plain",
         "csv": "text/csv", "md": "text/markdown", "json": "application/json"}  # fmt: skip


def _mime_of(filetype: str) -> str:
    return MIMES.get(filetype, "application/octet-stream")
