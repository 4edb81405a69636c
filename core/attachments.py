"""Files that travel with messages: one value for every platform, in and out.

An :class:`Attachment` is what a user sent with a message — a photo, a document, a voice
note — from the moment the platform offers it to the moment it is saved in the session's
workspace (docs/attachments.md). It starts *offered*: ``source`` says where the platform
keeps it (a Telegram file id, a Discord CDN URL, a Slack ``url_private_download``, a web
upload id, a local path for the terminal chat) and ``size`` is what the platform declared
(0 when it did not say). The gateway's intake downloads it through the adapter and returns
it *saved*: ``path`` (relative to the session's workspace, ``inbox/...``), its real
``size`` and ``sha256``. A voice note or audio file also gets its ``transcript``.

An :class:`OutgoingFile` is a file the agent hands back (the ``send_file`` tool): a
snapshot in the session's workspace, sent after the turn's reply through the outbox.

This module imports nothing of ours but the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AttachmentKind = Literal["image", "document", "audio", "voice", "video"]
ATTACHMENT_KINDS: tuple[AttachmentKind, ...] = ("image", "document", "audio", "voice", "video")
SPOKEN: frozenset[AttachmentKind] = frozenset(("audio", "voice"))
"""Kinds that are transcribed (``[transcription]``)."""

OutgoingKind = Literal["photo", "document"]
"""How a platform shows a sent file: inline as a picture, or as a file to download."""


@dataclass(frozen=True, slots=True)
class Attachment:
    """One file of an inbound message (offered, then saved: see the module docstring)."""

    kind: AttachmentKind
    name: str
    """The sender's file name, neutralised for display (never a path; the saved file's
    own name is in :attr:`path`)."""
    mime: str
    size: int
    """Bytes: as declared while offered (0 unknown), as written once saved."""
    source: str = ""
    """Where the platform keeps it; read only by the adapter that made it."""
    sha256: str = ""
    path: str = ""
    """Relative to the session's workspace once saved (``inbox/<unique name>``), else ""."""
    transcript: str | None = None
    """What a voice note or audio file says (set by the intake's transcription)."""

    @property
    def saved(self) -> bool:
        return bool(self.path)


@dataclass(frozen=True, slots=True)
class OutgoingFile:
    """A file the agent sends to the chat (queued by ``send_file``, delivered after the
    reply, once: the outbox keeps it by ``key``)."""

    key: str
    """Unique per queued file (its tool call): the outbox row and the platform's
    idempotency key."""
    path: str
    """Absolute path of the snapshot to send (inside the session's workspace)."""
    name: str
    """The file name the chat shows."""
    mime: str
    size: int
    kind: OutgoingKind
    caption: str = ""


def human_size(size: int) -> str:
    """A file size for people: ``512 bytes``, ``12.1 KB (12,345 bytes)``,
    ``3.4 MB (3,565,158 bytes)``."""
    if size < 1024:
        return f"{size} byte" if size == 1 else f"{size} bytes"
    unit, scaled = ("KB", size / 1024) if size < 1024 * 1024 else ("MB", size / 1024 / 1024)
    return f"{scaled:.1f} {unit} ({size:,} bytes)"
