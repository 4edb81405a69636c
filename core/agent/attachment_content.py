"""What the model sees of the files a user message came with (``docs/turn-loop.md`` §19).

The gateway's intake saves each file in the session's workspace before the turn
(docs/attachments.md); here the stored user message is built from the message's text and
its :class:`~core.attachments.Attachment` values:

* each file gets one text note: its kind, name, MIME type, size and workspace path (so the
  model can open it with ``read_file`` or the terminal); a voice note or audio file's note
  carries its transcript unless the message text already holds it;
* a small text file (at most the profile's ``inline_bytes``, valid UTF-8 without NUL) is
  inlined under its note;
* an image (PNG, JPEG, GIF or WebP) becomes a Chat Completions image part too when the
  profile's model accepts images (``vision = true``) — stored as a *reference*,
  ``{"type": "image_url", "image_url": {"url": "workspace:inbox/x.png"}}``, never as bytes.

Without an image part the content stays a plain string; with one it is a list: the text
block, then the image parts in order. At request time (:func:`for_request`, used by
:meth:`core.agent.transcript.Transcript.for_model`) the references of the *current* turn's
user message become ``data:<mime>;base64,...`` URLs read from the workspace (loaded once
per turn by :func:`current_images`; a missing or oversized file leaves the note alone); a
reference of an earlier turn is left out, its note stays. The history keeps references.
"""

from __future__ import annotations

import asyncio
import base64
import mimetypes
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.agent.profile import AgentProfile
from core.agent.turn import UserMessage
from core.attachments import Attachment, human_size
from core.tools.beneath import BadPath, open_regular
from core.types import ChatMessage, Content

WORKSPACE_SCHEME = "workspace:"
"""The URL scheme of a stored image reference: ``workspace:<path in the workspace>``."""
IMAGE_MIMES = frozenset(("image/png", "image/jpeg", "image/gif", "image/webp"))
"""Image types sent as image parts (what the Chat Completions vision models accept)."""
MAX_IMAGE_BYTES = 20 * 1024 * 1024
"""A larger image is not sent as a part (providers refuse it); its note still is."""
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


# the stored content ------------------------------------------------------------------


async def user_content(message: UserMessage, workspace: Path, profile: AgentProfile) -> Content:
    """The stored content of ``message``, which came with files: its text and notes, and
    its image references (a message without files is stored as its text)."""
    notes = await asyncio.to_thread(_notes, message, workspace, profile.inline_bytes)
    text = "\n\n".join(part for part in (message.text, *notes) if part)
    images = [image_ref(a.path) for a in message.attachments if _shown(a, profile.vision)]
    if not images:
        return text
    return [{"type": "text", "text": text}, *images]


def image_ref(path: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": WORKSPACE_SCHEME + path}}


def _shown(attachment: Attachment, vision: bool) -> bool:
    """Sent as an image part: a saved image of a type models take, to a vision model."""
    return vision and attachment.saved and attachment.kind == "image" and _is_image(attachment)


def _is_image(attachment: Attachment) -> bool:
    return attachment.mime in IMAGE_MIMES or _guessed_mime(attachment.path) in IMAGE_MIMES


def _notes(message: UserMessage, workspace: Path, inline_bytes: int) -> list[str]:
    notes: list[str] = []
    for attachment in message.attachments:
        inlined = _inlinable(workspace, attachment, inline_bytes)
        notes.append(note(attachment, message.text, inlined))
    return notes


def note(attachment: Attachment, text: str = "", inlined: str | None = None) -> str:
    """A file's note: kind, name, type, size and where it is; a transcript not already in
    ``text``; the ``inlined`` text under it."""
    a = attachment
    head = f"Attached {_KIND_WORDS[a.kind]}: {a.name} ({a.mime or 'unknown type'}, "
    if not a.saved:
        return f"[{head}size unknown): it could not be received]"
    body = head + f"{human_size(a.size)}), saved in your workspace at {a.path}"
    if a.transcript and a.transcript.strip() not in text:
        body += f'; transcript: "{a.transcript.strip()}"'
    if inlined is None:
        return f"[{body}]"
    return f"[{body}; its content follows]\n{fenced(a.name, inlined)}"


_KIND_WORDS = {
    "image": "image",
    "document": "file",
    "audio": "audio file",
    "voice": "voice note",
    "video": "video",
}


def fenced(name: str, text: str) -> str:
    """An inlined file between markers a file's own text is unlikely to hold."""
    return f"----- begin {name} -----\n{text.rstrip()}\n----- end {name} -----"


def _inlinable(workspace: Path, attachment: Attachment, limit: int) -> str | None:
    """A saved document's text when it is at most ``limit`` bytes of UTF-8 without NUL."""
    if not attachment.saved or attachment.kind != "document" or limit <= 0:
        return None
    data = _read_beneath(workspace, attachment.path, limit)
    if data is None or b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _read_beneath(workspace: Path, path: str, limit: int) -> bytes | None:
    """The whole file ``path`` beneath ``workspace`` (no symlink followed), or None when it
    is missing, refused or larger than ``limit`` bytes."""
    try:
        fd = open_regular(workspace, path, os.O_RDONLY)
    except (BadPath, OSError):
        return None
    with open(fd, "rb") as handle:
        if os.fstat(fd).st_size > limit:
            return None
        data = handle.read(limit + 1)
    return data if len(data) <= limit else None


# at request time ----------------------------------------------------------------------


async def current_images(content: Content, workspace: Path, vision: bool) -> dict[str, str]:
    """The image references of this turn's user message, each as a ``data:`` URL read
    from the workspace (a missing or oversized file is left out)."""
    refs = references(content) if vision else []
    if not refs:
        return {}
    return await asyncio.to_thread(_data_urls, workspace, refs)


def references(content: Content) -> list[str]:
    """The ``workspace:`` URLs of ``content``'s image parts, in order."""
    if not isinstance(content, list):
        return []
    return [url for part in content if (url := _reference(part)) is not None]


def _reference(part: dict[str, Any]) -> str | None:
    if part.get("type") != "image_url":
        return None
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else None
    return url if isinstance(url, str) and url.startswith(WORKSPACE_SCHEME) else None


def _data_urls(workspace: Path, refs: Sequence[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for ref in refs:
        path = ref.removeprefix(WORKSPACE_SCHEME)
        data = _read_beneath(workspace, path, MAX_IMAGE_BYTES)
        if data:
            encoded = base64.b64encode(data).decode("ascii")
            found[ref] = f"data:{image_mime(data, path)};base64,{encoded}"
    return found


def image_mime(data: bytes, path: str) -> str:
    """The image's type from its first bytes, else from its name."""
    for signature, mime in _SIGNATURES:
        if data.startswith(signature):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return _guessed_mime(path) or "application/octet-stream"


def _guessed_mime(path: str) -> str | None:
    return mimetypes.guess_type(path, strict=False)[0]


def for_request(message: ChatMessage, images: Mapping[str, str]) -> ChatMessage:
    """``message`` as sent: each image reference resolved from ``images`` (this turn's),
    else left out — its note is in the text."""
    content = message.content
    if not references(content):
        return message
    assert isinstance(content, list)
    sent: list[dict[str, Any]] = []
    for part in content:
        ref = _reference(part)
        if ref is None:
            sent.append(part)
        elif ref in images:
            sent.append({"type": "image_url", "image_url": {"url": images[ref]}})
    return replace(message, content=sent)


def around(blocks: list[dict[str, Any]], context: str, note: str) -> list[dict[str, Any]]:
    """List content with the ``pre_llm_call`` context as a first text block and the
    volatile note as a last one (for the model only)."""
    head = [{"type": "text", "text": context}] if context else []
    tail = [{"type": "text", "text": note}] if note else []
    return [*head, *blocks, *tail]
