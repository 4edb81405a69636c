"""Slack files, in and out (docs/attachments.md).

In: a message's ``files`` (a ``file_share`` message; the caption is its ``text``, maybe
"") become offered :class:`~core.attachments.Attachment` values — kind from the MIME type
(``image/*`` image, ``audio/*`` audio, ``video/*`` video, else document), a clip recorded
in Slack's composer (file ``subtype`` ``slack_audio``) a *voice* note whatever MIME type
Slack gave it (clips come as ``audio/webm``, ``audio/mp4``, sometimes ``video/mp4`` or
none: the MIME type is corrected to ``audio/…``); name, MIME type, declared size; the
source is ``url_private_download``. Deleted or hidden files (``mode`` ``tombstone`` /
``hidden_by_limit``) and files without a private URL (external ones) are left out.

Download: ``url_private_download`` is fetched with ``Authorization: Bearer <bot token>``
(httpx, streamed in chunks, never whole in memory). The token is only ever sent to Slack's
file hosts (``files.slack.com``, ``files.slack-gov.com``) or the configured API host (a
test's simulator). Without the ``files:read`` scope Slack does not refuse: it answers
``302`` to its sign-in page, an HTML page with status 200. An HTML answer for a file that
is not HTML is therefore :class:`~adapters.base.DownloadFailed` naming the missing scope,
never saved as the file.

Out: ``SendFile`` goes through slack_sdk's v2 external upload (``files_upload_v2``:
``files.getUploadURLExternal``, the bytes to the upload URL, ``files.completeUploadExternal``)
into the conversation's thread, the caption as ``initial_comment``. Slack names no message
``ts`` for a share (it is made asynchronously), so the :class:`~adapters.base.SentMessage`
of a file carries the **file id**. Exactly once: a file whose earlier upload was in
flight at a crash (``in_flight_since``) is looked for first in the conversation's
messages since the upload began (less a minute for clock skew): a message *from the bot*
carrying a file of the same name and size is taken as that upload, and nothing is sent
again. (Slack files carry no metadata to hold the outbox key, so two files of one name
and size sent within that minute, the second in flight at a crash, would be taken for
one.) A failed lookup uploads (at least once).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import AdapterError, ChatRef, DownloadFailed, Forbidden, SentMessage
from adapters.offered import display_name, kind_of, mime_of
from adapters.slack.errors import error_code, translate
from core.attachments import Attachment, AttachmentKind, OutgoingFile

UPLOAD_LIMIT = 1024**3
"""Bytes per file Slack accepts (1 GB, also slack_sdk's ``MAX_V2_FILE_SIZE``)."""
CHUNK = 64 * 1024
FILE_HOSTS = frozenset({"files.slack.com", "files.slack-gov.com"})
GONE_MODES = frozenset({"tombstone", "hidden_by_limit"})
AUDIO_CLIP = "slack_audio"
CLIP_MIMES = {"webm": "audio/webm", "mp4": "audio/mp4", "m4a": "audio/mp4", "ogg": "audio/ogg"}
SIGN_IN_PAGE = (
    "Slack sent its sign-in page instead of the file — the bot token lacks the "
    "files:read scope (add it under OAuth & Permissions and reinstall the app)"
)
MISSING_SCOPE = (
    "the bot token lacks the {scope} scope (add it under OAuth & Permissions and reinstall the app)"
)
UPLOAD_FIXES = {
    "file_uploads_disabled": "file uploads are disabled in this Slack workspace",
    "file_uploads_except_images_disabled": "this Slack workspace allows only images",
    "file_upload_size_restricted": "this Slack workspace restricts the size of uploads",
    "file_type_not_allowed": "this Slack workspace does not allow this type of file",
    "not_in_channel": "the bot is not in this channel (invite it)",
}
"""Slack's refusals of an upload, in words; each is final (``Forbidden``)."""

Json = dict[str, Any]


# in ----------------------------------------------------------------------------------------
def message_files(event: Json) -> list[Json]:
    """The file objects of a message event that can be fetched."""
    files = event.get("files")
    if not isinstance(files, list):
        return []
    return [f for f in files if isinstance(f, dict) and _fetchable(f)]


def _fetchable(f: Json) -> bool:
    url = f.get("url_private_download") or f.get("url_private")
    return f.get("mode") not in GONE_MODES and isinstance(url, str) and bool(url)


def attachments_of(event: Json) -> tuple[Attachment, ...]:
    """The offered attachments of a message event (see the module docstring)."""
    return tuple(attachment_of(f) for f in message_files(event))


def attachment_of(f: Json) -> Attachment:
    name = file_name(f)
    mime = mime_of(_text(f.get("mimetype")), name)
    kind: AttachmentKind
    if f.get("subtype") == AUDIO_CLIP:
        kind, mime = "voice", _clip_mime(mime, name)
    else:
        kind = kind_of(mime)
    size = f.get("size")
    source = _text(f.get("url_private_download")) or _text(f.get("url_private"))
    return Attachment(
        kind=kind,
        name=name,
        mime=mime,
        size=size if isinstance(size, int) and size > 0 else 0,
        source=source,
    )


def file_name(f: Json) -> str:
    """The sender's file name, harmless to show (:func:`adapters.offered.display_name`)."""
    return display_name(_text(f.get("name")) or _text(f.get("title")))


def _clip_mime(mime: str, name: str) -> str:
    if mime.startswith("audio/"):
        return mime
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return CLIP_MIMES.get(ext, "audio/mp4" if mime == "video/mp4" else "audio/webm")


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


# download ----------------------------------------------------------------------------------
class FileFetcher:
    """Streams Slack's private file URLs with the bot token (one httpx client, reused)."""

    def __init__(self, token: str, api_base_url: str) -> None:
        self.token = token
        self.hosts = FILE_HOSTS | {urlsplit(api_base_url).netloc}
        self._http: httpx.AsyncClient | None = None

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            timeout = httpx.Timeout(60.0, connect=10.0)
            self._http = httpx.AsyncClient(timeout=timeout, follow_redirects=True)
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def stream(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """The file's bytes as they arrive; :class:`DownloadFailed` says why not."""
        url = attachment.source
        if urlsplit(url).netloc not in self.hosts:
            raise DownloadFailed("its address is not one of Slack's file hosts")
        headers = {"Authorization": f"Bearer {self.token}"}
        try:
            async with self._client().stream("GET", url, headers=headers) as response:
                check_answer(response, attachment.mime)
                async for chunk in response.aiter_bytes(CHUNK):
                    yield chunk
        except httpx.HTTPError as exc:
            raise DownloadFailed(f"the connection to Slack broke ({type(exc).__name__})") from exc


def check_answer(response: httpx.Response, mime: str) -> None:
    """Raise :class:`DownloadFailed` unless ``response`` is the file itself."""
    status = response.status_code
    if status == 404:
        raise DownloadFailed("Slack no longer has the file (deleted, or past retention)")
    if status in (401, 403):
        raise DownloadFailed(f"Slack refused the download (HTTP {status})")
    if status != 200:
        raise DownloadFailed(f"Slack answered HTTP {status}")
    ctype = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    if ctype == "text/html" and mime != "text/html":
        raise DownloadFailed(SIGN_IN_PAGE)


# upload ------------------------------------------------------------------------------------
async def upload(
    client: AsyncWebClient, chat: ChatRef, file: OutgoingFile, caption: str
) -> SentMessage:
    """Share ``file`` in the conversation (v2 external upload); its SentMessage names the
    file id."""
    with upload_errors():
        response = await client.files_upload_v2(
            file=file.path,
            filename=file.name,
            title=file.name,
            channel=chat.chat_id,
            thread_ts=chat.thread_id,
            initial_comment=caption or None,
        )
    shared = response.get("file")
    file_id = shared.get("id") if isinstance(shared, dict) else None
    if not isinstance(file_id, str) or not file_id:
        raise AdapterError("slack: files.completeUploadExternal named no file")
    return SentMessage(chat, file_id)


def shared_file(messages: list[Any], file: OutgoingFile, bot: tuple[str, str | None]) -> str | None:
    """The id of a file like ``file`` (name and size) that the bot (``(user id, bot
    id)``) shared in ``messages``; None if none did."""
    for message in messages:
        if not isinstance(message, dict) or not _from_bot(message, bot):
            continue
        for f in message.get("files") or []:
            if isinstance(f, dict) and f.get("name") == file.name and f.get("size") == file.size:
                found = f.get("id")
                if isinstance(found, str) and found:
                    return found
    return None


def _from_bot(message: Json, bot: tuple[str, str | None]) -> bool:
    user, bot_id = bot
    return message.get("user") == user or (bot_id is not None and message.get("bot_id") == bot_id)


@contextmanager
def upload_errors() -> Iterator[None]:
    """slack-sdk errors of an upload as the adapter error tree, a refusal in words."""
    try:
        yield
    except SlackApiError as exc:
        code = error_code(exc)
        fix = UPLOAD_FIXES.get(code)
        if code == "missing_scope":
            needed = exc.response.get("needed")
            fix = MISSING_SCOPE.format(scope=needed if isinstance(needed, str) else "files:write")
        if fix is not None:
            raise Forbidden(f"slack: {fix}") from exc
        raise translate(exc) from exc
    except SlackClientError as exc:  # the upload URL's own failure (SlackRequestError)
        raise translate(exc) from exc
    except OSError as exc:
        raise AdapterError(f"slack: the file could not be read ({exc.strerror})") from exc
