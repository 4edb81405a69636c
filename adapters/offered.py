"""How an adapter describes a file a user offers: its shown name, its type, its kind.

Shared by the adapters that take files in without a platform of their own to describe
them (the web chat's uploads, the terminal chat's ``/attach``). The saved file's own name
in the workspace is the gateway's business (``gateway/turns/workspace_files.py``); these only make
what is shown and stored harmless.
"""

from __future__ import annotations

import mimetypes
import re
import unicodedata

from core.attachments import AttachmentKind

MAX_NAME = 120
OCTET_STREAM = "application/octet-stream"
_MIME = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")


def display_name(raw: str) -> str:
    """A sender's file name made safe to show and to store: the last path component, no
    control, format (bidi overrides) or unassigned characters, ≤ 120 characters with the
    extension kept, ``"file"`` when nothing is left (``..``, an empty name)."""
    base = re.split(r"[/\\]", raw)[-1]
    cleaned = "".join(c for c in base if unicodedata.category(c)[0] not in "CZ" or c == " ")
    cleaned = cleaned.strip()
    if not cleaned.strip("."):
        return "file"
    if len(cleaned) <= MAX_NAME:
        return cleaned
    stem, dot, extension = cleaned.rpartition(".")
    if not dot or not stem or len(extension) > 16:
        return cleaned[:MAX_NAME]
    return stem[: MAX_NAME - len(extension) - 1] + "." + extension


def mime_of(declared: str | None, name: str) -> str:
    """The declared type when it looks like one (parameters dropped), else a guess from
    the name, else ``application/octet-stream``."""
    kind = (declared or "").split(";")[0].strip().lower()
    if _MIME.fullmatch(kind) and kind != OCTET_STREAM:
        return kind
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed or OCTET_STREAM


def kind_of(mime: str) -> AttachmentKind:
    """``image/*`` → image, ``audio/*`` → audio, ``video/*`` → video, anything else a
    document."""
    major = mime.partition("/")[0]
    if major == "image":
        return "image"
    if major == "audio":
        return "audio"
    if major == "video":
        return "video"
    return "document"


def shown_size(size: int) -> str:
    """``512 B``, ``12.3 KB``, ``4.0 MB``: a size for people (1 KB = 1024 bytes)."""
    if size < 1024:
        return f"{size} B"
    value, unit = size / 1024, "KB"
    for larger in ("MB", "GB"):
        if value < 1024:
            break
        value, unit = value / 1024, larger
    return f"{value:.1f} {unit}"
