"""Discord files: a message's attachments offered, downloaded from the CDN, files sent.

Inbound (docs/attachments.md): each of a message's ``attachments`` is offered as an
:class:`core.attachments.Attachment`: ``kind`` from its ``content_type`` (``image/*``,
``audio/*`` — ``voice`` when the message carries Discord's voice-message flag, 1 << 13 —,
``video/*``, anything else a document), ``name`` its ``filename``, ``size`` as Discord
declared it, ``source`` its signed CDN URL. A message with files and no text is still a
text message with text ``""``. Without the MESSAGE_CONTENT intent Discord blanks the
attachments of guild messages that do not mention the bot, as it blanks their text.

Download: :class:`Downloads` streams the URL with httpx in chunks as they arrive (never the
whole file in memory, unlike discord.py's ``Attachment.read``). Only Discord's CDN hosts
(and the host of a configured ``api_base``, a simulator's) are fetched. A signed URL
expires after about a day; the CDN then answers 404 "This content is no longer available."
Every failure is a :class:`adapters.base.DownloadFailed` saying why in words.

Outbound: :func:`send_file` uploads with discord.py's ``discord.File`` (read from the
snapshot's path as aiohttp sends it), the caption as the message's content, with the
nonce of its outbox key and ``enforce_nonce`` so a send again after a crash shows once.
:data:`UPLOAD_LIMIT` is 10 MiB, the limit for bots in a server without boosts (discord.py
``utils.DEFAULT_FILE_SIZE_LIMIT_BYTES``, ``Guild.filesize_limit`` at tier 0 and 1;
Discord's help article "My files are too powerful" 213247207); a larger file is refused
by Discord with 413 / 40005, translated to :class:`adapters.base.TooLong`.
"""

from __future__ import annotations

import mimetypes
from collections.abc import AsyncIterator, Iterable

import discord
import httpx

from adapters.base import AdapterError, DownloadFailed
from core.attachments import Attachment, AttachmentKind, OutgoingFile

UPLOAD_LIMIT: int = discord.utils.DEFAULT_FILE_SIZE_LIMIT_BYTES
CDN_HOSTS = frozenset({"cdn.discordapp.com", "media.discordapp.net"})
CHUNK = 64 * 1024
DOWNLOAD_TIMEOUT = httpx.Timeout(60.0, connect=10.0)
"""Seconds of silence allowed between chunks (and to connect)."""
MAX_CAPTION = 2000
_KINDS: dict[str, AttachmentKind] = {"image": "image", "audio": "audio", "video": "video"}


def kind_of(mime: str, *, voice: bool) -> AttachmentKind:
    """The attachment kind of a MIME type (a voice message's audio is ``voice``)."""
    kind = _KINDS.get(mime.partition("/")[0], "document")
    return "voice" if kind == "audio" and voice else kind


def mime_of(content_type: str | None, filename: str) -> str:
    """``type/subtype`` as declared (parameters dropped), else guessed from the name."""
    declared = (content_type or "").partition(";")[0].strip().lower()
    return declared or mimetypes.guess_type(filename)[0] or "application/octet-stream"


def attachments_of(message: discord.Message) -> tuple[Attachment, ...]:
    """The message's files, offered (see the module docstring)."""
    voice = message.flags.voice
    offered = []
    for item in message.attachments:
        mime = mime_of(item.content_type, item.filename)
        spoken = voice or item.is_voice_message()
        offered.append(Attachment(kind_of(mime, voice=spoken), item.filename, mime,
                                  int(item.size), source=item.url))  # fmt: skip
    return tuple(offered)


class Downloads:
    """Streams attachments from Discord's CDN over one httpx client (opened on first use)."""

    def __init__(self, extra_hosts: Iterable[str] = ()) -> None:
        self.hosts = CDN_HOSTS | frozenset(extra_hosts)
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=DOWNLOAD_TIMEOUT, follow_redirects=False)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def stream(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """The attachment's bytes in chunks as they arrive; :class:`DownloadFailed`."""
        url = self._checked(attachment)
        try:
            async with self._http().stream("GET", url) as response:
                if response.status_code != 200:
                    raise DownloadFailed(_refusal(response.status_code))
                async for chunk in response.aiter_bytes(CHUNK):
                    yield chunk
        except httpx.HTTPError as exc:
            why = f"the download from Discord broke off ({type(exc).__name__})"
            raise DownloadFailed(why) from exc

    def _checked(self, attachment: Attachment) -> httpx.URL:
        try:
            url = httpx.URL(attachment.source)
        except httpx.InvalidURL as exc:
            raise DownloadFailed(f"its address is not a Discord file link ({exc})") from exc
        if url.scheme not in ("http", "https") or url.host not in self.hosts:
            raise DownloadFailed(f"its address is not on Discord's CDN ({url.host or '?'})")
        return url


def _refusal(status: int) -> str:
    """Why the CDN's answer is not the file (the reason a user reads)."""
    if status == 404:
        return "Discord no longer has the file (its link expired, or it was deleted)"
    return f"Discord's CDN answered HTTP {status}"


async def send_file(
    channel: discord.abc.Messageable, file: OutgoingFile, caption: str, nonce: str,
    mentions: discord.AllowedMentions,
) -> discord.Message:  # fmt: skip
    """Upload ``file`` with ``caption`` as the message text (cut to Discord's 2,000)."""
    content = caption if len(caption) <= MAX_CAPTION else caption[: MAX_CAPTION - 1] + "…"
    try:
        upload = discord.File(file.path, filename=file.name)
    except OSError as exc:
        raise AdapterError(f"discord: cannot read {file.name} to send it: {exc}") from exc
    try:
        return await channel.send(
            content or None, file=upload, nonce=nonce, allowed_mentions=mentions
        )
    finally:
        upload.close()
