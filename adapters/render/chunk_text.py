"""Split Markdown (or plain text) source into chunks that fit a length limit.

Cuts fall at line ends where possible. In Markdown mode a cut inside a fenced code block
closes the fence and the next chunk reopens it with the same info string (language), so
every chunk renders as code on its own. A line longer than the limit is cut hard. A
source that fits the limit with room for a fence's closer to spare is its one chunk (the
same chunk, without splitting it into lines).
"""

from __future__ import annotations

from adapters.render.units import MOST_PER_CHARACTER, LengthUnit, measure

FENCES = ("```", "~~~")


def chunk_text(source: str, limit: int, unit: LengthUnit, *, fences: bool = True) -> list[str]:
    if limit <= 0:
        raise ValueError("limit must be positive")
    room = _room(limit)
    if len(source) * MOST_PER_CHARACTER[unit] <= room or measure(source, unit) <= room:
        whole = source.strip("\n")
        return [whole] if whole.strip() else []
    return chunk_lines(source, limit, unit, fences=fences)


def chunk_lines(source: str, limit: int, unit: LengthUnit, *, fences: bool = True) -> list[str]:
    """:func:`chunk_text` line by line (any source; ``limit`` positive)."""
    chunks: list[str] = []
    current: list[str] = []
    fence: str | None = None  # the opening fence line while inside a code block
    for line in _lines(source, limit, unit):
        closer = _closer(fence)
        if current and _size([*current, line], closer, unit) > limit:
            chunks.append("\n".join([*current, closer] if fence else current))
            current = [fence] if fence else []
        current.append(line)
        if fences and line.lstrip().startswith(FENCES):
            fence = None if fence else line.strip()
    if current:
        chunks.append("\n".join(current))
    return [chunk for chunk in (c.strip("\n") for c in chunks) if chunk.strip()]


def _closer(fence: str | None) -> str:
    return fence[:3] if fence else ""


def _size(lines: list[str], closer: str, unit: LengthUnit) -> int:
    tail = measure("\n" + closer, unit) if closer else 0
    return measure("\n".join(lines), unit) + tail


def _lines(source: str, limit: int, unit: LengthUnit) -> list[str]:
    """Source lines, with any line wider than ``limit`` (less fence room) cut hard."""
    room = _room(limit)
    lines: list[str] = []
    for line in source.split("\n"):
        while measure(line, unit) > room:
            head = _prefix_within(line, room, unit)
            lines.append(head)
            line = line[len(head) :]
        lines.append(line)
    return lines


def _room(limit: int) -> int:
    """Units a line may take: the limit less room for a fence's closer."""
    return max(1, limit - 8)


def _prefix_within(line: str, room: int, unit: LengthUnit) -> str:
    used = 0
    for index, char in enumerate(line):
        used += measure(char, unit)
        if used > room:
            return line[: max(index, 1)]
    return line
