"""Values a ``pre_tool_call`` hook may return. ``None`` means "no opinion"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Block:
    """The tool does not run; the model gets ``Blocked: <reason>`` as an error result."""

    reason: str


@dataclass(frozen=True, slots=True)
class AskUser:
    """Ask the approver first; anything but approval gives ``Not approved (<outcome>)``."""

    prompt: str


@dataclass(frozen=True, slots=True)
class Modify:
    """Merge ``args`` into the tool arguments before the tool runs."""

    args: dict[str, Any]
