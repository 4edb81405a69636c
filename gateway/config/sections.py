"""The chat-side sections of ``config.toml``: what users may send and how a turn shows.

``[attachments]`` (files taken in, docs/attachments.md), ``[transcription]`` (voice notes
and audio files to text) and ``[progress]`` (the progress message and reactions,
:class:`gateway.progress.ProgressConfig`). Frozen models like every section
(:class:`adapters.config.Section`); :class:`gateway.config.schema.Config` holds one of each.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator

from adapters.config import (
    Flag,
    HttpUrl,
    NonNegativeInt,
    PositiveInt,
    PositiveNumber,
    Section,
    Text,
    choice,
    got,
    invalid,
    secret_field,
    show,
    suggest,
)
from core.attachments import ATTACHMENT_KINDS, AttachmentKind

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
    kinds: Annotated[tuple[AttachmentKind, ...], BeforeValidator(_kinds)] = ATTACHMENT_KINDS
    """The kinds taken in; another kind is refused with a reply (no download)."""
    inline_bytes: NonNegativeInt = DEFAULT_INLINE_BYTES
    """A text file up to this size is shown to the model whole; 0: never inlined."""


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
    mode: Annotated[ProgressMode, BeforeValidator(choice("off", "new", "all"))] = "new"
    cleanup: Flag = True
    becomes_reply: Flag = True
    """Edit the progress message into the reply's first chunk (one call instead of two)."""
    new_message_after: PositiveNumber = 10.0
    """A turn longer than this ends with a new message, so the user is notified."""
    reactions: Flag = False
    """Mark the user's message 👀 when its turn starts, ✅ / ❌ when it ends."""
