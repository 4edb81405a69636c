"""Text that can always be written: the edges (store, model wire) pass every string through here.

A Python ``str`` may hold lone UTF-16 surrogates (``"\\ud800"``): a chat platform or a model
server can send them as JSON escapes, and ``json.loads`` keeps them. Such a string cannot be
encoded as UTF-8, so writing it to SQLite or sending it in a request body raises
``UnicodeEncodeError``. :func:`valid_text` joins surrogates that form a pair (a pair split
across stream chunks becomes the real character again) and replaces lone ones with U+FFFD.
Everything else — emoji, right-to-left text, zero-width and control characters — is kept.

Inbound text is made valid once, where it enters: each adapter's normalize step repairs the
platform's item (:func:`valid_json` on a decoded payload, :func:`repair_fields` on a record
built from it), so every event the gateway reads — text, names, chat and user ids — can be
estimated, hashed and stored. The user is told nothing: a lone surrogate shows as U+FFFD.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
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


def repair_fields(record: object) -> None:
    """Make every string field of a frozen dataclass instance valid, in place: for its
    ``__post_init__``, so a record cannot be built holding a lone surrogate. Strings in
    tuples, lists and dicts, and nested dataclasses, are repaired too; a field that needs
    nothing is not touched."""
    for field in fields(record):  # type: ignore[arg-type]
        value = getattr(record, field.name)
        fixed = _valid_value(value)
        if fixed is not value:
            object.__setattr__(record, field.name, fixed)


def _valid_value(value: Any) -> Any:
    """``value`` itself when every string in it is valid, else a repaired copy."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, tuple):
        items = tuple(_valid_value(item) for item in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict | list):
        fixed = valid_json(value)
        return value if fixed == value else fixed
    if is_dataclass(value) and not isinstance(value, type):
        return _valid_copy(value)
    return value


def _valid_copy(record: Any) -> Any:
    changes = {}
    for field in fields(record):
        if not field.init:
            continue
        value = getattr(record, field.name)
        fixed = _valid_value(value)
        if fixed is not value:
            changes[field.name] = fixed
    return replace(record, **changes) if changes else record
