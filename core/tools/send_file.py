"""``send_file``: hand a file of the session's workspace to the user's chat
(``docs/turn-loop.md`` §19; the delivery is the gateway's, docs/attachments.md).

Arguments: ``path`` (inside the session's workspace, relative or absolute) and an optional
``caption``. The call:

1. opens the file beneath the workspace the way the file tools do
   (:mod:`core.tools.beneath`: ``..`` may not climb out, no symlink is followed, only a
   regular file) and refuses an empty one or one over :data:`MAX_SEND_BYTES`;
2. checks it for secrets: a *text* file (valid UTF-8 without NUL) passes the chat
   redactor (:func:`core.redaction.redact`: the configured secret values, verbatim or
   encoded, become ``[REDACTED]``); a *binary* file holding a configured secret in any
   of the redactor's forms (read byte for byte, and as UTF-16) is refused whole —
   ``send_file: <name> holds a configured secret; not sent`` — and nothing is queued;
3. hands the checked bytes with an :class:`~core.attachments.OutgoingFile` to
   ``ToolContext.queue_file``, whose keeper (the gateway) stores them outside every
   workspace — so the file the chat gets is the one checked, whatever the agent (or a
   command in its sandbox) does to the original or plants in the workspace afterwards;
   ``key`` is stable for the call (session, turn and call id: servers reuse call ids
   across turns), so a replay keeps the same file once and the outbox sends it once. A
   picture (PNG, JPEG, GIF, WebP up to :data:`MAX_PHOTO_BYTES`) goes as a ``photo``,
   anything else as a ``document``. The result says it was queued — the gateway sends it
   after the reply — or why the chat cannot take it.

Risk ``safe`` (no approval asked): the file goes only to the chat of the user this
conversation serves, it changes nothing in the workspace, and its content is what the
agent could already show that user as text — through the same redactor, with binary
files holding a secret refused outright.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
import posixpath
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from core.attachments import OutgoingFile, OutgoingKind, human_size
from core.redaction import KNOWN, redact
from core.tools.base import Tool, ToolContext, ToolResult
from core.tools.beneath import BadPath, open_regular
from core.tools.files import SHARED_WORKERS, FileWorkers
from core.tools.sandbox import Workspaces
from core.types import ToolSpec

MAX_SEND_BYTES = 50 * 1024 * 1024
"""The largest file ``send_file`` takes (50 MB: a Telegram bot's upload limit; a platform
with a lower one refuses through ``queue_file``)."""
MAX_PHOTO_BYTES = 10 * 1024 * 1024
"""A picture up to this size goes as a photo (Telegram's limit for one), else a document."""
PHOTO_MIMES = frozenset(("image/png", "image/jpeg", "image/gif", "image/webp"))
CANNOT_RECEIVE = "send_file: this conversation cannot receive files"
_READINGS = ("latin-1", "utf-8", "utf-16-le", "utf-16-be")
_SCAN_CHUNK = 1 << 20
_SCAN_OVERLAP = 4096
"""More than any configured secret's longest encoded form: one spanning two pieces is
whole in the overlap."""


class NotSent(Exception):
    """Why the file is not sent: the one sentence the model gets back."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What is sent: the checked bytes and how the chat shows them."""

    content: bytes
    name: str
    mime: str
    size: int
    kind: OutgoingKind


def send_file_tool(
    *,
    workspace: Path | None = None,
    workspaces: Workspaces | None = None,
    workers: FileWorkers = SHARED_WORKERS,
) -> Tool:
    """The tool; it works in the session's workspace as the file tools do."""

    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path, caption = args.get("path"), args.get("caption") or ""
        if not isinstance(path, str) or not path.strip() or not isinstance(caption, str):
            return ToolResult("send_file needs a 'path' string (and an optional 'caption')", True)
        if ctx.queue_file is None:
            return ToolResult(CANNOT_RECEIVE, is_error=True)
        where = partial(_place, ctx, workspace, workspaces)
        try:
            snap = await workers.run(ctx, partial(take_snapshot, where, path))
        except NotSent as refused:
            return ToolResult(f"send_file: {refused}", is_error=True)
        except TimeoutError:
            return ToolResult(f"send_file did not finish within {workers.seconds:g} s", True)
        return await _queue(ctx, snap, caption.strip())

    spec = ToolSpec(
        name="send_file",
        description=(
            "Send a file from the workspace to the user's chat (a picture as a photo, "
            "anything else as a document). It is delivered after your reply."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path of the file in the workspace."},
                "caption": {"type": "string", "description": "Optional text shown with it."},
            },
            "required": ["path"],
        },
        risk="safe",
    )
    return Tool(spec=spec, handler=handler)


async def _queue(ctx: ToolContext, snap: Snapshot, caption: str) -> ToolResult:
    assert ctx.queue_file is not None
    key = file_key(ctx)
    file = OutgoingFile(key, "", snap.name, snap.mime, snap.size, snap.kind, caption)
    refusal = await ctx.queue_file(file, snap.content)
    if refusal is not None:
        return ToolResult(f"send_file: {snap.name} is not sent: {refusal}", is_error=True)
    size = human_size(snap.size)
    return ToolResult(f"Queued {snap.name} ({size}); it is sent to the chat with your reply.")


def file_key(ctx: ToolContext) -> str:
    """The file's key: stable for one call of one turn (the outbox's idempotency key)."""
    seed = f"{ctx.session_id}\0{ctx.turn_id}\0{ctx.call_id}".encode()
    return hashlib.sha256(seed).hexdigest()[:24]


def _place(ctx: ToolContext, workspace: Path | None, workspaces: Workspaces | None) -> Path:
    if workspaces is None:
        return workspace or ctx.workspace
    return workspaces.ensure(ctx.session_key)


# on the file thread ------------------------------------------------------------------


def take_snapshot(where: Callable[[], Path], shown: str) -> Snapshot:
    """Read and check ``shown`` (see the module docstring); raises :class:`NotSent`."""
    workspace = where()
    name = display_name(shown)
    data = _read(workspace, shown, name)
    content, is_text = _checked(data, name)
    mime = _mime(name, is_text)
    photo = not is_text and mime in PHOTO_MIMES and len(content) <= MAX_PHOTO_BYTES
    kind: OutgoingKind = "photo" if photo else "document"
    return Snapshot(content, name, mime, len(content), kind)


def _read(workspace: Path, shown: str, name: str) -> bytes:
    try:
        fd = open_regular(workspace, shown, os.O_RDONLY)
    except BadPath as bad:
        raise NotSent(str(bad)) from None
    except OSError as exc:
        raise NotSent(f"{shown}: {exc.strerror or exc}") from None
    with open(fd, "rb") as handle:
        size = os.fstat(fd).st_size
        if size == 0:
            raise NotSent(f"{name} is empty; there is nothing to send")
        if size > MAX_SEND_BYTES:
            limit = human_size(MAX_SEND_BYTES)
            raise NotSent(f"{name} is {human_size(size)}, over the limit of {limit}")
        data = handle.read(size + 1)  # one more byte: a file still growing is noticed
    if not data or len(data) > size:
        raise NotSent(f"{name} changed while it was read; try again")
    return data


def _checked(data: bytes, name: str) -> tuple[bytes, bool]:
    """What is sent, and whether it is text: text redacted, binary with a secret refused."""
    text = as_text(data)
    if text is not None:
        return redact(text).encode("utf-8"), True
    if holds_secret(data):
        raise NotSent(f"{name} holds a configured secret; not sent")
    return data, False


def as_text(data: bytes) -> str | None:
    """``data`` as text when it is valid UTF-8 without a NUL byte, else None."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def holds_secret(data: bytes) -> bool:
    """A configured secret (in any of the redactor's forms) in ``data``, read byte for byte
    (ASCII and its encodings), as UTF-8 and as UTF-16 — a megabyte at a time, each piece
    overlapping the next by :data:`_SCAN_OVERLAP` bytes, so memory stays small."""
    for start in range(0, len(data), _SCAN_CHUNK):  # even starts keep UTF-16 aligned
        piece = data[start : start + _SCAN_CHUNK + _SCAN_OVERLAP]
        if any(KNOWN.found_in(piece.decode(codec, errors="replace")) for codec in _READINGS):
            return True
    return False


def display_name(path: str) -> str:
    """The name the chat shows: the path's last part without control or bidi characters."""
    base = posixpath.basename(path.rstrip("/"))
    shown = "".join(c for c in base if unicodedata.category(c)[0] != "C").strip()
    return shown or "file"


def _mime(name: str, is_text: bool) -> str:
    guessed = mimetypes.guess_type(name, strict=False)[0]
    if guessed is not None:
        return guessed
    return "text/plain" if is_text else "application/octet-stream"
