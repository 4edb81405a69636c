"""Short, secret-free previews of tool arguments for chat (progress lines, approval cards).

Redaction is conservative: ``key=value`` pairs whose key names a secret, bearer tokens,
and well-known token shapes (``sk-…``, ``ghp_…``, ``xox…-``, long hex/base64 runs) become
``***``. A preview is one line, cut to ``limit`` characters with an ellipsis.
"""

from __future__ import annotations

import json
import re
from typing import Any

REDACTED = "***"
PRIMARY_ARGUMENTS = ("command", "query", "path", "url", "pattern", "question", "task", "text")

_SECRET_PAIR = re.compile(
    r"(?i)\b([\w-]*(?:api[_-]?key|token|secret|password|passwd|pwd|auth)[\w-]*)"
    r"(\s*[=:]\s*|\"\s*:\s*\")([^\s\"',;&]+)"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[\w\-.~+/=]+")
_TOKEN_SHAPES = re.compile(
    r"\b(?:sk-[\w-]{8,}|gh[pousr]_\w{16,}|xox[abposr]-[\w-]{8,}|AKIA[0-9A-Z]{12,}"
    r"|[0-9a-fA-F]{32,}|[A-Za-z0-9+/_-]{40,}={0,2})"
)


def redact(text: str) -> str:
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _SECRET_PAIR.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return _TOKEN_SHAPES.sub(REDACTED, text)


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
