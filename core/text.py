"""Text that can always be written: the edges (store, model wire) pass every string through here.

A Python ``str`` may hold lone UTF-16 surrogates (``"\\ud800"``): a chat platform or a model
server can send them as JSON escapes, and ``json.loads`` keeps them. Such a string cannot be
encoded as UTF-8, so writing it to SQLite or sending it in a request body raises
``UnicodeEncodeError``. :func:`valid_text` joins surrogates that form a pair (a pair split
across stream chunks becomes the real character again) and replaces lone ones with U+FFFD.
Everything else — emoji, right-to-left text, zero-width and control characters — is kept.
"""

from __future__ import annotations

from typing import Any


def valid_text(text: str) -> str:
    """``text`` unchanged if it encodes as UTF-8; otherwise with its surrogates repaired."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def valid_json(value: Any) -> Any:
    """``value`` (decoded JSON: dicts, lists, strings, scalars) with every string valid."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_json(key): valid_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [valid_json(item) for item in value]
    return value
