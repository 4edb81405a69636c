"""The tool contract.

A tool is a :class:`core.types.ToolSpec` (what the model sees, plus ``risk`` and
``interactive``) and an async handler ``handler(args, ctx) -> ToolResult``. Handlers must
honour ``ctx.token`` for long work (``await ctx.token.guard(...)``). A raised exception is
turned into an error result by the loop; handlers never crash a turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from core.attachments import OutgoingFile
from core.cancellation import CancellationToken
from core.types import ToolSpec


@dataclass(frozen=True, slots=True)
class ToolResult:
    text: str
    is_error: bool = False
    images: tuple[str, ...] = ()
    """Images the tool returned: paths in the session's workspace (PNG, JPEG, GIF or WebP),
    each also named in ``text``. A vision model sees them after the turn's tool results
    (:mod:`core.agent.tool_images`); otherwise the text's note is all it gets."""


@dataclass(frozen=True, slots=True)
class Choice:
    """A question for the user with fixed choices (the ``clarify`` tool)."""

    question: str
    choices: tuple[str, ...]


AskChoice = Callable[[Choice], Awaitable[str | None]]
"""Present a question, return the chosen option (``None`` on timeout/cancel)."""

RunChild = Callable[[str, CancellationToken], Awaitable[str]]
"""Run a child agent on a task with a child token; returns its final reply."""

QueueFile = Callable[[OutgoingFile, bytes], Awaitable[str | None]]
"""``run_turn``'s ``on_file`` (``ToolContext.queue_file``): keep a file the agent sends
(``send_file``) for delivery after the reply. ``content`` is what is sent, already checked
(text redacted, binary free of secrets); the keeper stores it where no sandbox reaches and
sets ``file.path`` (docs/attachments.md, "Outbound"). Returns None when queued, else why it
cannot be sent (the chat cannot take files, over the platform's upload limit) for the
tool's result."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    session_key: str
    session_id: str
    turn_id: str
    call_id: str
    token: CancellationToken
    workspace: Path
    ask_choice: AskChoice | None = None
    run_child: RunChild | None = None
    queue_file: QueueFile | None = None
    """Hand a file to the chat after the reply (None: this conversation cannot receive
    files, e.g. a run without a chat)."""
    requested_by: str | None = None
    """Who is speaking (``TurnScope.requested_by``, platform-qualified); None: nobody."""


ToolHandler = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]


@dataclass(frozen=True, slots=True)
class Tool:
    spec: ToolSpec
    handler: ToolHandler


class ToolSource(Protocol):
    """Tools that may change while the process runs (an MCP server's, ``core.mcp``): a
    registry asks its sources at every look-up; its own tools win a name."""

    def tool(self, name: str) -> Tool | None: ...

    def names(self) -> list[str]: ...


class ToolRegistry:
    def __init__(self, tools: Sequence[Tool] = (), sources: Sequence[ToolSource] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._sources = tuple(sources)
        self._own_specs: tuple[ToolSpec, ...] | None = None
        """:meth:`specs` of a registry without sources, made once (until a register)."""
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.spec.name in self._tools:
            raise ValueError(f"tool {tool.spec.name!r} registered twice")
        self._tools[tool.spec.name] = tool
        self._own_specs = None

    def get(self, name: str) -> Tool | None:
        found = self._tools.get(name)
        for source in self._sources:
            if found is not None:
                break
            found = source.tool(name)
        return found

    def names(self) -> list[str]:
        if not self._sources:
            return sorted(self._tools)
        return sorted({*self._tools, *(n for s in self._sources for n in s.names())})

    def specs(self, names: Sequence[str] | None = None) -> Sequence[ToolSpec]:
        """Specs in stable (sorted) order, optionally restricted to ``names``. Without
        sources the whole list cannot change between registrations: it is made once."""
        if names is None and not self._sources:
            if self._own_specs is None:
                self._own_specs = tuple(self._tools[n].spec for n in sorted(self._tools))
            return self._own_specs
        chosen = self.names() if names is None else [n for n in self.names() if n in names]
        return [tool.spec for n in chosen if (tool := self.get(n)) is not None]

    def subset(self, names: Sequence[str]) -> ToolRegistry:
        """Only the own tools in ``names``; the sources stay whole (a profile's ``tools``
        list names built-ins, its ``mcp_servers`` chose the sources)."""
        own = [self._tools[n] for n in sorted(self._tools) if n in names]
        return ToolRegistry(own, self._sources)
