"""Images a tool returned, shown to a vision model (``docs/turn-loop.md`` §5).

A Chat Completions ``tool`` message carries text only. A tool that returns an image saves
it in the session's workspace and names it in its text (:attr:`core.tools.base.ToolResult.images`,
e.g. an MCP server's image block, :mod:`core.mcp.results`). When the turn's model accepts
images (``vision = true``):

* the runner reads each named image once, when the call ends (:func:`loaded`): at most
  :data:`MAX_IMAGES_PER_RESULT`, each a PNG, JPEG, GIF or WebP of at most
  :data:`~core.agent.attachment_content.MAX_IMAGE_BYTES` (the user's images' limits) —
  kept in memory on the transcript's entry, never stored;
* every request of the turn sends, right after a run of tool messages, one ``user`` message
  with a text naming the images and their ``data:`` URLs as image parts
  (:func:`with_tool_images`); the tool message's text gains :data:`FOLLOWS`. Only the
  turn's latest :data:`MAX_IMAGES_PER_REQUEST` go; older ones keep their note alone.

The store keeps the tool's text with its note, so stored sessions stay small and a later
turn sees the note only. Without vision nothing is read: the note is all the model gets.
"""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from core.agent.attachment_content import IMAGE_MIMES, MAX_IMAGE_BYTES, image_mime
from core.tools.beneath import BadPath, open_regular
from core.types import ChatMessage

MAX_IMAGES_PER_RESULT = 4
"""Images of one tool result read for the model; the rest keep their note alone."""
MAX_IMAGES_PER_REQUEST = 4
"""Tool images one request carries: the turn's latest."""
FOLLOWS = "[The image follows in the next message.]"
"""Added (for the model only) to a tool message whose images are sent."""


@dataclass(frozen=True, slots=True)
class ToolImage:
    """An image a tool returned: its workspace path and its ``data:`` URL."""

    path: str
    url: str


async def loaded(paths: Sequence[str], workspace: Path) -> tuple[ToolImage, ...]:
    """The images at ``paths`` in ``workspace`` that a model can take (a missing, refused,
    oversized or non-image file is left out; its note stays)."""
    if not paths:
        return ()
    return await asyncio.to_thread(_loaded, paths[:MAX_IMAGES_PER_RESULT], workspace)


def _loaded(paths: Sequence[str], workspace: Path) -> tuple[ToolImage, ...]:
    found: list[ToolImage] = []
    for path in paths:
        data = _read(workspace, path)
        mime = image_mime(data, path) if data else None
        if data and mime in IMAGE_MIMES:
            found.append(ToolImage(path, f"data:{mime};base64,{base64.b64encode(data).decode()}"))
    return tuple(found)


def _read(workspace: Path, path: str) -> bytes | None:
    """The file beneath ``workspace`` (no symlink followed), None when missing or too big."""
    try:
        fd = open_regular(workspace, path, os.O_RDONLY)
    except (BadPath, OSError):
        return None
    with open(fd, "rb") as handle:
        if os.fstat(fd).st_size > MAX_IMAGE_BYTES:
            return None
        data = handle.read(MAX_IMAGE_BYTES + 1)
    return data if len(data) <= MAX_IMAGE_BYTES else None


Returned = Sequence[tuple[ChatMessage, tuple[ToolImage, ...]]]
"""The turn's tool messages that returned images, with them, in order."""


def latest(returned: Returned) -> dict[int, list[ToolImage]]:
    """Of the turn's tool messages and their images (in order), the latest
    :data:`MAX_IMAGES_PER_REQUEST` images, by the ``id`` of their message."""
    chosen: dict[int, list[ToolImage]] = {}
    room = MAX_IMAGES_PER_REQUEST
    for message, images in reversed(returned):
        taken = list(images[-room:]) if room > 0 else []
        room -= len(taken)
        if taken:
            chosen[id(message)] = taken
    return chosen


def with_tool_images(
    messages: Sequence[ChatMessage], shown: Mapping[int, Sequence[ToolImage]]
) -> list[ChatMessage]:
    """``messages`` with, after each run of tool messages some of which returned ``shown``
    images (by the ``id`` of the message), one user message carrying them; each such tool
    message says the image follows. An assistant reply comes next, so roles alternate."""
    sent: list[ChatMessage] = []
    pending: list[ToolImage] = []
    for message in messages:
        if message.role != "tool" and pending:
            sent.append(images_message(pending))
            pending = []
        images = shown.get(id(message), ())
        if images:
            message = replace(message, content=f"{message.text()}\n{FOLLOWS}")
            pending.extend(images)
        sent.append(message)
    if pending:
        sent.append(images_message(pending))
    return sent


def images_message(images: Sequence[ToolImage]) -> ChatMessage:
    """The user message that shows tool images: their names, then the image parts."""
    names = ", ".join(image.path for image in images)
    text = f"[Images returned by the tool calls above, in order: {names}]"
    parts = [{"type": "image_url", "image_url": {"url": image.url}} for image in images]
    return ChatMessage(role="user", content=[{"type": "text", "text": text}, *parts])
