"""A server's ``CallToolResult`` as the model's tool result.

* text blocks: their text, in order;
* an image (or audio) block: saved into the session's workspace under ``mcp-files/`` and
  named in the text (``[image image/png, 1.2 KB: mcp-files/…png]``), so the agent can look
  at it or send it with ``send_file``; a saved image is also one of the result's
  ``images``, which a vision model sees after the tool results (:mod:`core.agent.tool_images`);
* an embedded resource: its text under its URI, or a note of a binary one's size; a
  resource link: its URI and name;
* no content but ``structuredContent``: that, as JSON;
* ``isError``: the same text, as an error result.

The text is capped like the terminal's output (:data:`MAX_RESULT_CHARS`). A server's
result is untrusted text: it reaches the model as a tool result, never the system prompt.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import mimetypes
from pathlib import Path

import mcp_types as types

from core.tools.base import ToolResult

MAX_RESULT_CHARS = 16_000
FILES_DIR = "mcp-files"


def tool_result(result: types.CallToolResult, workspace: Path | None) -> ToolResult:
    """The model's view of ``result`` (see the module docstring)."""
    blocks = [_block(block, workspace) for block in result.content]
    parts = [text for text, _ in blocks]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = "\n".join(parts) if parts else "(no output)"
    images = tuple(path for _, path in blocks if path is not None)
    return ToolResult(capped(text), is_error=bool(result.is_error), images=images)


def capped(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[truncated {len(text) - limit} chars]"


def _block(block: object, workspace: Path | None) -> tuple[str, str | None]:
    """A content block's text, and the workspace path of the image it saved (if any)."""
    if isinstance(block, types.ImageContent):
        return _saved(block.type, block.mime_type, block.data, workspace)
    if isinstance(block, types.AudioContent):
        return _saved(block.type, block.mime_type, block.data, workspace)[0], None
    return _text(block), None


def _text(block: object) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.EmbeddedResource):
        return _resource(block.resource)
    if isinstance(block, types.ResourceLink):
        return f"[resource link: {block.uri} ({block.name})]"
    return f"[{getattr(block, 'type', type(block).__name__)} content not shown]"


def _resource(resource: types.TextResourceContents | types.BlobResourceContents) -> str:
    if isinstance(resource, types.TextResourceContents):
        return f"[resource {resource.uri}]\n{resource.text}"
    size = len(resource.blob) * 3 // 4
    return f"[resource {resource.uri}: {resource.mime_type or 'binary'}, {_size(size)}]"


def _saved(kind: str, mime: str, data: str, workspace: Path | None) -> tuple[str, str | None]:
    """The block's note, and its path in ``workspace`` when saved there."""
    try:
        content = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[{kind} {mime}: not valid base64]", None
    if workspace is None:
        return f"[{kind} {mime}, {_size(len(content))}: not saved]", None
    extension = mimetypes.guess_extension(mime) or ".bin"
    name = f"{FILES_DIR}/{kind}-{hashlib.sha256(content).hexdigest()[:16]}{extension}"
    target = workspace / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    return f"[{kind} {mime}, {_size(len(content))}: {name}]", name


def _size(count: int) -> str:
    return f"{count} bytes" if count < 1024 else f"{count / 1024:.1f} KB"
