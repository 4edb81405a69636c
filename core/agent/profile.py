"""A profile: everything that shapes one agent's turns (from ``[profiles.<name>]``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

BusyPolicy = Literal["queue", "interrupt", "steer"]

DEFAULT_MAX_ITERATIONS = 500
"""The iteration budget of one turn (``docs/turn-loop.md`` §9)."""


@dataclass(frozen=True, slots=True)
class AgentProfile:
    name: str = "default"
    model: str = "demo"
    soul: str = "You are a helpful assistant."
    """The stable prompt tier: the text of the profile's SOUL.md."""
    soul_path: Path | None = None
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    run_budget_seconds: float | None = None
    """Wall-clock budget; at 80 % a one-shot wrap-up reminder is injected. None: dormant."""
    review_input_budget: int | None = None
    """Aggregate input tokens for a detached review task; None: unlimited."""
    tools: tuple[str, ...] | None = None
    """Tool names enabled for this profile; None: all registered tools."""
    workspace: Path = Path(".")
    approval_timeout: float = 300.0
    busy_policy: BusyPolicy = "queue"
    queue_limit: int = 20
    stream: bool = False
    external_runtime: tuple[str, ...] | None = None
    """Command line of an external runtime that takes over whole turns (JSON lines)."""
