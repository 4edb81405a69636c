"""Text length as each platform counts it (Telegram: UTF-16 code units)."""

from __future__ import annotations

from typing import Literal

LengthUnit = Literal["utf16", "codepoints", "bytes"]


def measure(text: str, unit: LengthUnit) -> int:
    if unit == "utf16":
        return len(text.encode("utf-16-le")) // 2
    if unit == "bytes":
        return len(text.encode("utf-8"))
    return len(text)
