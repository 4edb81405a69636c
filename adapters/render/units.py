"""Text length as each platform counts it (Telegram: UTF-16 code units)."""

from __future__ import annotations

from typing import Literal

LengthUnit = Literal["utf16", "codepoints", "bytes"]
MOST_PER_CHARACTER: dict[LengthUnit, int] = {"utf16": 2, "codepoints": 1, "bytes": 4}
"""The most units one character takes: a text of ``n`` characters is at most ``n`` times
this long, so a short reply is known to fit without being measured."""


def measure(text: str, unit: LengthUnit) -> int:
    if unit == "utf16":
        return len(text.encode("utf-16-le")) // 2
    if unit == "bytes":
        return len(text.encode("utf-8"))
    return len(text)
