"""Short, secret-free previews of tool arguments for chat (progress lines, approval cards).

Redaction is :func:`core.redaction.redact` (the chat's redactor, also used by approval
prompts: the configured secret values, nothing else) with a short mask, ``***``, so
previews stay short. A preview is one line, cut to ``limit`` characters with an ellipsis.
"""

from __future__ import annotations

import json
from typing import Any

from core.redaction import redact as redact_secrets

REDACTED = "***"
PRIMARY_ARGUMENTS = ("command", "query", "path", "url", "pattern", "question", "task", "text")


def redact(text: str) -> str:
    """``text`` with the configured secrets masked as ``***`` (:func:`core.redaction.redact`)."""
    return redact_secrets(text, REDACTED)


def shorten(text: str, limit: int) -> str:
    one_line = " ".join(text.split())
    if len(one_line) <= limit:
        return one_line
    return one_line[: max(limit - 1, 0)] + "…"


def arguments_of(raw: object) -> dict[str, Any]:
    """Tool arguments as a dict, whether given as a dict or as the model's JSON text."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str) and raw.strip():
        try:
            parsed = json.loads(raw)
        except ValueError:
            return {"": raw}
        return parsed if isinstance(parsed, dict) else {"": parsed}
    return {}


def preview(raw_arguments: object, limit: int = 40) -> str:
    """The most telling argument (``command``, ``path``, …), redacted and shortened."""
    arguments = arguments_of(raw_arguments)
    for name in PRIMARY_ARGUMENTS:
        value = arguments.get(name)
        if isinstance(value, str) and value:
            return shorten(redact(value), limit)
    if not arguments:
        return ""
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return shorten(redact(text), limit)
