"""The registry names of MCP tools, and what of a server's words the model may see.

A tool is ``mcp__<server>__<tool>``: only ``[a-zA-Z0-9_-]`` (anything else becomes ``_``)
and at most :data:`MAX_NAME` characters, the providers' limit; a longer name keeps its
first characters and ends in a short hash of the whole, so two long names stay apart.
A description is the server's untrusted text: cut to :data:`MAX_DESCRIPTION` characters.
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "mcp__"
SEPARATOR = "__"
MAX_NAME = 64
MAX_DESCRIPTION = 1024
"""Characters of a tool's description the model is shown."""

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_HASH = 8


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, safe and at most :data:`MAX_NAME` characters."""
    name = _UNSAFE.sub("_", f"{PREFIX}{server}{SEPARATOR}{tool}")
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH]
    return f"{name[: MAX_NAME - _HASH - 1]}_{digest}"


def description(server: str, text: str | None) -> str:
    """The description the model sees: the server named, the text capped."""
    text = (text or "").strip()
    if len(text) > MAX_DESCRIPTION:
        text = text[: MAX_DESCRIPTION - 1] + "…"
    return f"[MCP server {server}] {text}".rstrip()
