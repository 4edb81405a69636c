"""The chat-side sections of ``config.toml``: what users may send and how a turn shows.

``[attachments]`` (files taken in, docs/attachments.md), ``[transcription]`` (voice notes
and audio files to text) and ``[progress]`` (the progress message and reactions,
:class:`gateway.turns.progress.ProgressConfig`); and where state lives and how processes share it:
``[store]``, ``[cluster]`` (docs/cluster.md) and ``[telemetry]`` (traces). Frozen models
like every section (:class:`adapters.config.Section`); :class:`gateway.config.schema.Config`
holds one of each.
"""

from __future__ import annotations

from typing import Annotated, Literal

from adapters.config import (
    Flag,
    HttpUrl,
    NonNegativeInt,
    PositiveInt,
    PositiveNumber,
    Section,
    Text,
    choice,
    secret_field,
)
from adapters.config_reader import Check, got, invalid, show, suggest
from core.attachments import ATTACHMENT_KINDS, AttachmentKind

DEFAULT_DOWNLOAD_SECONDS = 30.0
"""The least time a download is given (``[attachments] download_min_seconds``)."""
DEFAULT_DOWNLOAD_RATE = 32 * 1024
"""Bytes per second a download must average (``[attachments] download_min_rate``)."""

ProgressMode = Literal["off", "new", "all"]

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
"""``[attachments] max_bytes``: the largest file a user may send (20 MB)."""
DEFAULT_INLINE_BYTES = 16384
"""``[attachments] inline_bytes``: a text file up to this size is inlined for the model."""


def _kinds(value: object) -> object:
    if not isinstance(value, list | tuple):
        raise invalid(f"expected an array, {got(value)}")
    unknown = [kind for kind in value if kind not in ATTACHMENT_KINDS]
    if unknown:
        expected = ", ".join(f'"{kind}"' for kind in ATTACHMENT_KINDS)
        raise invalid(
            f"expected kinds among {expected}, got {show(unknown[0])}"
            f"{suggest(unknown[0], ATTACHMENT_KINDS)}"
        )
    return tuple(dict.fromkeys(value))


class AttachmentsSection(Section):
    """Files users send with their messages (docs/attachments.md)."""

    max_bytes: PositiveInt = DEFAULT_MAX_BYTES
    """The largest file taken in, in bytes; a larger one is refused with a reply."""
    kinds: Annotated[tuple[AttachmentKind, ...], Check(_kinds)] = ATTACHMENT_KINDS
    """The kinds taken in; another kind is refused with a reply (no download)."""
    inline_bytes: NonNegativeInt = DEFAULT_INLINE_BYTES
    """A text file up to this size is shown to the model whole; 0: never inlined."""
    download_min_seconds: PositiveNumber = DEFAULT_DOWNLOAD_SECONDS
    download_min_rate: PositiveNumber = DEFAULT_DOWNLOAD_RATE
    """A download is given up after ``max(download_min_seconds, size / download_min_rate)``
    seconds (bytes per second), with one reply."""


class TranscriptionSection(Section):
    """An OpenAI-compatible ``/audio/transcriptions`` endpoint for voice notes and audio
    files (OpenAI, Groq, a local whisper server). Off until ``base_url`` is set."""

    base_url: HttpUrl | None = None
    """The part before ``/audio/transcriptions``; unset: voice is not transcribed."""
    model: Text = "whisper-1"
    api_key: str | None = secret_field("COMMONOS_TRANSCRIPTION_API_KEY")
    """Sent as a Bearer token; a local server may need none."""
    timeout: PositiveNumber = 120.0
    """Seconds one transcription may take, the upload included."""
    language: Text | None = None
    """The spoken language as an ISO-639-1 code (``"en"``); unset: the server detects it."""

    @property
    def configured(self) -> bool:
        return self.base_url is not None


class ProgressSection(Section):
    mode: Annotated[ProgressMode, Check(choice("off", "new", "all"))] = "new"
    cleanup: Flag = True
    becomes_reply: Flag = True
    """Edit the progress message into the reply's first chunk (one call instead of two)."""
    new_message_after: PositiveNumber = 10.0
    """A turn longer than this ends with a new message, so the user is notified."""
    reactions: Flag = False
    """Mark the user's message 👀 when its turn starts, ✅ / ❌ when it ends."""


def _store_url(value: object) -> str | None:
    """Empty or unset: the SQLite file; else a ``postgresql://`` (or ``postgres://``) URL."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.startswith(("postgresql://", "postgres://")):
        return value
    raise invalid(
        f"expected a postgresql://user:password@host:port/database URL, got {show(mask_url(value))}"
    )


def mask_url(value: object) -> object:
    """``value`` with the password of a URL replaced by ``***`` (never shown, never logged)."""
    if not isinstance(value, str):
        return value
    head, sep, rest = value.partition("://")
    if not sep or "@" not in rest:
        return value
    userinfo, at, host = rest.rpartition("@")
    user, colon, _password = userinfo.partition(":")
    return f"{head}://{user}{':***' if colon else ''}{at}{host}"


class StoreSection(Section):
    """Where the gateway keeps its state (docs/cluster.md). Unset ``url``: one SQLite file,
    ``<data_dir>/commonos.db``, for one process. A ``postgresql://`` URL: PostgreSQL, which
    several ``commonos run`` processes can share."""

    url: Annotated[str | None, Check(_store_url)] = secret_field("COMMONOS_STORE_URL")
    """``postgresql://user:password@host:port/database``; its password is a secret."""
    pool_size: PositiveInt = 10
    """Connections each process keeps open to PostgreSQL (one more listens)."""

    @property
    def postgres(self) -> bool:
        return self.url is not None

    def secrets(self) -> list[str]:
        """The URL and, alone, its password (an error may quote either)."""
        if self.url is None:
            return []
        password = url_password(self.url)
        return [self.url, password] if password else [self.url]


def url_password(url: str) -> str | None:
    """The password in ``scheme://user:password@host/...``, if any."""
    _head, sep, rest = url.partition("://")
    userinfo, at, _host = rest.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return None
    return userinfo.partition(":")[2] or None


class ClusterSection(Section):
    """Several processes on one PostgreSQL store (docs/cluster.md); ignored on SQLite."""

    name: Text | None = None
    """How ``commonos status`` names this process; unset: ``<hostname>:<pid>``."""
    lease_seconds: PositiveNumber = 10.0
    """A bot or session lease not renewed for this long passes to another process
    (renewed every third of it, so a takeover comes within 4/3 of it: 13.3 s by default)."""


class TelemetrySection(Section):
    """OpenTelemetry traces, exported by OTLP over HTTP; off until ``otlp_endpoint`` is set."""

    otlp_endpoint: HttpUrl | None = None
    """The collector's base URL (``http://127.0.0.1:4318``); spans go to ``/v1/traces``."""
    service_name: Text = "commonos-gateway"
