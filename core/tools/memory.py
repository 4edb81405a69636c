"""The memory tools: ``memory_save(text, scope)``, ``memory_search(query)``,
``memory_forget(id)`` (README "Memory").

Each call works within the turn's :class:`~core.memory.scopes.Viewer`, derived from the
turn's session key and speaker (``ToolContext.requested_by``): a search returns only what
the speaker may see in this chat, a save writes the speaker's person scope or this chat's,
a forget reaches only the speaker's own entries and this chat's. Saved entries are
searchable at once and in the prompt from the next session. Registered only when
``[memory]`` is on (:func:`memory_tools`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from core.memory.book import MemoryBook, where
from core.memory.scopes import Viewer, viewer_of
from core.store.base import Store
from core.tools.base import Tool, ToolContext, ToolResult
from core.types import ToolSpec

SEARCH_LIMIT = 10
NOTHING_FOUND = "Nothing remembered matches."

SAVE = ToolSpec(
    name="memory_save",
    description=(
        "Remember a durable fact for later conversations (a preference, a name, a decision)."
        " scope 'person': about the person speaking, private to them; 'chat': about this"
        " group or channel, for all its members. One short fact per entry."
    ),
    parameters={
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "The fact, self-contained."},
            "scope": {"type": "string", "enum": ["person", "chat"], "default": "person"},
        },
        "required": ["text"],
    },
)
SEARCH = ToolSpec(
    name="memory_search",
    description="Search what was remembered in earlier conversations (words, any order).",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
)
FORGET = ToolSpec(
    name="memory_forget",
    description="Forget a remembered entry by its id (the number after #).",
    parameters={
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "required": ["id"],
    },
)


@dataclass(frozen=True, slots=True)
class MemoryTools:
    """The three tools of one profile, over the store."""

    store: Store
    book: MemoryBook
    profile: str

    async def viewer(self, ctx: ToolContext) -> Viewer:
        return await viewer_of(
            self.store, self.book.memory, ctx.session_key, ctx.requested_by, self.profile
        )

    async def save(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        text, scope = args.get("text"), args.get("scope", "person")
        if not isinstance(text, str) or scope not in ("person", "chat"):
            return ToolResult("memory_save needs 'text' and scope 'person' or 'chat'", True)
        answer, failed = await self.book.save(await self.viewer(ctx), text, scope)
        return ToolResult(answer, is_error=failed)

    async def search(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = args.get("query")
        if not isinstance(query, str):
            return ToolResult("memory_search needs a 'query' string", is_error=True)
        found = await self.book.search(await self.viewer(ctx), query, SEARCH_LIMIT)
        lines = [f"#{e.id} ({where(e.owner)}): {e.text}" for e in found]
        return ToolResult("\n".join(lines) or NOTHING_FOUND)

    async def forget(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        entry_id = args.get("id")
        if not isinstance(entry_id, int) or isinstance(entry_id, bool):
            return ToolResult("memory_forget needs an integer 'id'", is_error=True)
        if await self.book.forget(await self.viewer(ctx), entry_id):
            return ToolResult(f"Forgot #{entry_id}.")
        return ToolResult(f"No entry #{entry_id} this conversation may forget.", True)


def memory_tools(store: Store, book: MemoryBook, profile: str) -> list[Tool]:
    tools = MemoryTools(store, book, profile)
    handlers: list[tuple[ToolSpec, Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]]]
    handlers = [(SAVE, tools.save), (SEARCH, tools.search), (FORGET, tools.forget)]
    return [Tool(spec=spec, handler=handler) for spec, handler in handlers]
