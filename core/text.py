"""Text that can always be written: repaired once, where it enters, and trusted inside.

A Python ``str`` may hold lone UTF-16 surrogates (``"\\ud800"``): a chat platform or a model
server can send them as JSON escapes, and ``json.loads`` keeps them; a file name the OS
cannot decode comes back with them (``surrogateescape``). Such a string cannot be encoded
as UTF-8, so writing it to SQLite or PostgreSQL or sending it in a request body raises
``UnicodeEncodeError``. :func:`valid_text` joins surrogates that form a pair (a pair split
across stream chunks becomes the real character again) and replaces lone ones with U+FFFD.
Everything else — emoji, right-to-left text, zero-width and control characters — is kept.

Text is made valid once, at the edge where it enters the gateway, and nowhere else: the
store binds its parameters as given and the model request body is not walked again. The
edges (docs/architecture.md, "Text at the edges"):

* **platform events** — each adapter's normalize step repairs the platform's item:
  Telegram's update (:func:`adapters.telegram.normalize.valid_update`), Slack's payloads
  (:func:`valid_json`), Discord's envelope and the web page's message
  (:func:`repair_fields` in their ``__post_init__``); the terminal decodes its input with
  ``errors="replace"`` (nothing to repair). So every event the gateway reads — text,
  names, chat and user ids, file names — can be estimated, hashed and stored;
* **model replies** — :mod:`core.model.wire` (content, a tool call's id, name and
  arguments, an error object) and :mod:`core.model.stream` (each fragment, the joined
  text and calls);
* **tool results** — :mod:`core.agent.tool_runner`, where a result enters the turn: a
  command's output, an MCP server's answer, a file name from the sandbox, an exception's
  message, a ``transform_tool_result`` hook's text;
* **MCP tool listings** — a server's tool description and schema
  (:mod:`core.mcp.tools`);
* **transcripts** — the transcription server's text (:mod:`gateway.turns.transcription`).

Files read from disk are decoded strictly as UTF-8 (which never yields a surrogate). The
user is told nothing: a lone surrogate shows as U+FFFD.
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
