"""A profile: everything that shapes one agent's turns (from ``[profiles.<name>]``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core.agent.context import DEFAULT_COMPACT_AT
from core.tools.sandbox import Workspaces, WorkspaceScope

BusyPolicy = Literal["queue", "interrupt", "steer"]

DEFAULT_INLINE_BYTES = 16384
"""Text files up to this size are inlined for the model (``docs/turn-loop.md`` §19)."""
DEFAULT_MAX_ITERATIONS = 500
"""The iteration budget of one turn (``docs/turn-loop.md`` §9)."""


@dataclass(frozen=True, slots=True)
class AgentProfile:
    name: str = "default"
    model: str = "demo"
    soul: str = "You are a helpful assistant."
    """The stable prompt tier: the text of the profile's SOUL.md."""
    soul_path: Path | None = None
    skills_index: str = ""
    """The rest of the stable tier: the names and descriptions of the profile's skills
    (:func:`core.skills.index.skills_index`); ``""``: none."""
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    run_budget_seconds: float | None = None
    """Wall-clock budget; at 80 % a one-shot wrap-up reminder is injected. None: dormant."""
    review_input_budget: int | None = None
    """Aggregate input tokens for a detached review task; None: unlimited."""
    tools: tuple[str, ...] | None = None
    """Tool names enabled for this profile; None: all registered tools."""
    workspace: Path = Path(".")
    """The profile's workspace root (see :attr:`workspace_scope`)."""
    workspace_scope: WorkspaceScope = "profile"
    """``"profile"``: every session works in :attr:`workspace` itself; ``"session"``: each in
    its own directory under it (:class:`~core.tools.sandbox.Workspaces`, as the gateway's
    tools are built; ``[profiles.<name>] workspace_scope``, default ``"session"`` there)."""
    approval_timeout: float = 300.0
    busy_policy: BusyPolicy = "queue"
    queue_limit: int = 20
    stop_clears_queue: bool = True
    """``/stop`` drops the session's queued messages too (False: they run next)."""
    debounce_ms: int = 0
    """Text messages from one person arriving within this many milliseconds of each other
    while the session is idle run as one turn (:mod:`core.debounce`); 0: off."""
    stream: bool = False
    context_window: int | None = None
    """The model's context window in tokens (``[model] context_window``, default 32768 in
    the gateway); None: unknown, nothing is compacted nor cut (``docs/turn-loop.md`` §18)."""
    compact_at: float = DEFAULT_COMPACT_AT
    """Compact when the next request would pass this share of the window."""
    vision: bool = False
    """The model accepts images: a user's image goes to it as an image part (else as a
    note naming where it was saved; ``docs/turn-loop.md`` §19)."""
    inline_bytes: int = DEFAULT_INLINE_BYTES
    """A text file the user sends of at most this many bytes is inlined in the message the
    model sees (``[attachments] inline_bytes``); 0: never."""
    external_runtime: tuple[str, ...] | None = None
    """Command line of an external runtime that takes over whole turns (JSON lines)."""

    def workspaces(self) -> Workspaces:
        """Where this profile's sessions work (:attr:`workspace`, :attr:`workspace_scope`)."""
        return Workspaces(self.workspace, self.workspace_scope)

    def session_workspace(self, session_key: str) -> Path:
        """The directory the tools of ``session_key`` work in, the one the system prompt
        names (``docs/turn-loop.md`` §2 step 3); it may not exist yet."""
        return self.workspaces().path_for(session_key)
