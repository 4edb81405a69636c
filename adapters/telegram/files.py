"""Files on Telegram: the media of an inbound message as offered attachments, their
download, and the bot's own uploads (docs/attachments.md).

Inbound (:func:`attachments_of`): a photo is its largest size (Telegram sends several, the
thumbnails are files of their own), named ``photo-<file_unique_id>.jpg``; a document keeps
its file name and MIME type and is kind ``image`` when that type is ``image/*`` (a
screenshot sent uncompressed); a voice note is kind ``voice``, an audio file ``audio``; a
video, a round video note and an animation (a GIF, which Telegram turns into MP4) are
``video``. A sender's file name is made harmless to show (no path, control or bidi
characters, at most 120 characters). Each offered :class:`~core.attachments.Attachment`
carries the ``file_id`` as its ``source`` and the size Telegram declared.

Download (:meth:`TelegramFiles.download`): ``getFile`` gives the file's path, then the file
URL (``base_file_url``) is streamed with httpx in 64 KiB chunks, never held whole. Telegram
lets bots download files of at most 20 MB: ``getFile`` of a bigger one is refused ("file is
too big") and the :class:`~adapters.base.DownloadFailed` says so in words.

Upload (:meth:`TelegramFiles.send`): a ``photo`` goes by ``sendPhoto`` (shown inline); a
photo Telegram refuses as a picture (``PHOTO_INVALID_DIMENSIONS``, ``IMAGE_PROCESS_FAILED``)
is sent once more as a document; anything else by ``sendDocument``. The caption is plain
text (at most 1024 characters, cut with "…"), the topic kept. Bots upload at most 50 MB
(:data:`UPLOAD_LIMIT`); a bigger body is answered 413 and raised as
:class:`~adapters.base.TooLong`. The Bot API has no idempotency key: a file whose upload was
in flight at a crash is sent again on the replay (docs/architecture.md §9, "Exactly once").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from telegram import Bot, Message, PhotoSize
from telegram import error as tg

from adapters.base import AdapterError, ChatRef, DownloadFailed, SentMessage, TooLong
from adapters.offered import display_name
from adapters.telegram.errors import platform_errors
from core.attachments import Attachment, AttachmentKind, OutgoingFile

_log = logging.getLogger(__name__)

MB = 1024 * 1024
DOWNLOAD_LIMIT = 20 * MB
"""The largest file a bot may download (core.telegram.org/bots/api#getfile)."""
UPLOAD_LIMIT = 50 * MB
"""The largest file a bot may upload (core.telegram.org/bots/api#sending-files)."""
CAPTION_LIMIT = 1024
CHUNK = 64 * 1024
DOWNLOAD_TIMEOUT = httpx.Timeout(10.0, read=60.0)
"""Connect within 10 s; then at most 60 s between two chunks of a download."""
PHOTO_REFUSALS = ("photo_invalid_dimensions", "image_process_failed", "photo_save_file_invalid")
"""What Telegram answers a photo it cannot show as a picture (then it goes as a document)."""


# inbound -------------------------------------------------------------------------------------
def attachments_of(message: Message) -> tuple[Attachment, ...]:
    """The files ``message`` carries, offered (one at most: a Telegram message has one media;
    an album is several messages, folded by :mod:`adapters.telegram.albums`)."""
    found = _media(message)
    return () if found is None else (found,)


def _media(message: Message) -> Attachment | None:
    if message.photo:
        return _photo(message.photo)
    if message.animation is not None:  # before document: Telegram sets both for an animation
        a = message.animation
        name = a.file_name or f"animation-{a.file_unique_id}.mp4"
        return _offered("video", name, a.mime_type or "video/mp4", a.file_size, a.file_id)
    if message.document is not None:
        d = message.document
        mime = d.mime_type or "application/octet-stream"
        kind: AttachmentKind = "image" if mime.startswith("image/") else "document"
        name = d.file_name or f"document-{d.file_unique_id}"
        return _offered(kind, name, mime, d.file_size, d.file_id)
    if message.voice is not None:
        v = message.voice
        mime = v.mime_type or "audio/ogg"
        return _offered("voice", f"voice-{v.file_unique_id}.ogg", mime, v.file_size, v.file_id)
    if message.audio is not None:
        au = message.audio
        name = au.file_name or f"audio-{au.file_unique_id}.mp3"
        return _offered("audio", name, au.mime_type or "audio/mpeg", au.file_size, au.file_id)
    if message.video is not None:
        vi = message.video
        name = vi.file_name or f"video-{vi.file_unique_id}.mp4"
        return _offered("video", name, vi.mime_type or "video/mp4", vi.file_size, vi.file_id)
    if message.video_note is not None:
        n = message.video_note
        name = f"video-note-{n.file_unique_id}.mp4"
        return _offered("video", name, "video/mp4", n.file_size, n.file_id)
    return None


def _photo(sizes: tuple[PhotoSize, ...]) -> Attachment:
    largest = max(sizes, key=lambda p: (p.width * p.height, p.file_size or 0))
    name = f"photo-{largest.file_unique_id}.jpg"
    return _offered("image", name, "image/jpeg", largest.file_size, largest.file_id)


def _offered(
    kind: AttachmentKind, name: str, mime: str, size: int | None, file_id: str
) -> Attachment:
    """The sender's name is made harmless to show (``adapters.offered.display_name``)."""
    shown = display_name(name)
    return Attachment(kind=kind, name=shown, mime=mime, size=size or 0, source=file_id)


# download and upload -------------------------------------------------------------------------
class TelegramFiles:
    """Downloads and uploads for one bot (its httpx client is opened on first use)."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot
        self._http: httpx.AsyncClient | None = None

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    async def download(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """The bytes of an offered attachment, chunk by chunk (module docstring)."""
        url = await self._file_url(attachment)
        try:
            async with self._client().stream("GET", url) as response:
                if response.status_code != 200:
                    raise DownloadFailed(f"Telegram's file server answered {response.status_code}")
                async for chunk in response.aiter_bytes(CHUNK):
                    yield chunk
        except httpx.HTTPError as exc:  # never the URL: it holds the bot token
            raise DownloadFailed(f"the download broke off ({type(exc).__name__})") from None

    async def _file_url(self, attachment: Attachment) -> str:
        try:
            # a no-op once the adapter started; an adapter another process runs the bot
            # for (docs/cluster.md) opens its Bot API client here, closed by stop()
            await self.bot.initialize()
            file = await self.bot.get_file(attachment.source)
        except tg.InvalidToken:  # its message holds the token
            raise DownloadFailed("Telegram rejected the bot's token") from None
        except tg.BadRequest as exc:
            raise DownloadFailed(_refusal(exc.message)) from None
        except tg.TelegramError as exc:
            raise DownloadFailed(f"Telegram did not give the file ({exc.message})") from None
        if not file.file_path:
            raise DownloadFailed("Telegram gave no path for the file")
        return file.file_path

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=DOWNLOAD_TIMEOUT)
        return self._http

    async def send(self, chat: ChatRef, file: OutgoingFile, caption: str) -> SentMessage:
        """Upload ``file`` to ``chat`` (module docstring); errors as the adapter tree."""
        text = _caption(caption)
        if file.kind == "photo":
            try:
                return await self._upload(chat, file, text, photo=True)
            except AdapterError as exc:
                if not _photo_refused(exc):
                    raise
                _log.info("telegram: %s refused as a photo (%s); sent as a file", file.name, exc)
        return await self._upload(chat, file, text, photo=False)

    async def _upload(
        self, chat: ChatRef, file: OutgoingFile, caption: str, *, photo: bool
    ) -> SentMessage:
        thread = int(chat.thread_id) if chat.thread_id is not None else None
        data = await asyncio.to_thread(Path(file.path).read_bytes)  # PTB sends bytes whole
        with platform_errors(), _upload_errors(file):
            if photo:
                message = await self.bot.send_photo(
                    chat.chat_id, data, caption=caption or None, filename=file.name,
                    message_thread_id=thread,
                )  # fmt: skip
            else:
                message = await self.bot.send_document(
                    chat.chat_id, data, caption=caption or None, filename=file.name,
                    message_thread_id=thread,
                )  # fmt: skip
        return SentMessage(chat, str(message.message_id))


def _refusal(description: str) -> str:
    """Why ``getFile`` refused, in words (PTB capitalises the description)."""
    text = description.lower()
    if "file is too big" in text:
        return f"Telegram lets bots download files of at most {DOWNLOAD_LIMIT // MB} MB"
    if "invalid file_id" in text or "wrong file_id" in text:
        return "Telegram no longer has this file (invalid file_id)"
    return f"Telegram refused it ({description})"


def _caption(caption: str) -> str:
    return caption if len(caption) <= CAPTION_LIMIT else caption[: CAPTION_LIMIT - 1] + "…"


def _photo_refused(exc: AdapterError) -> bool:
    cause = exc.__cause__
    text = str(cause.message if isinstance(cause, tg.TelegramError) else exc).lower()
    return isinstance(cause, tg.BadRequest) and any(n in text for n in PHOTO_REFUSALS)


@contextmanager
def _upload_errors(file: OutgoingFile) -> Iterator[None]:
    """A 413 (PTB raises it as a NetworkError) becomes :class:`TooLong` naming the limit."""
    try:
        yield
    except tg.NetworkError as exc:
        if "entity too large" not in exc.message.lower():
            raise
        limit = UPLOAD_LIMIT // MB
        raise TooLong(f"{file.name} is over the {limit} MB a Telegram bot may send") from exc
