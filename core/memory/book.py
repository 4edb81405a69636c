"""Saving, searching and forgetting memory within a :class:`~core.memory.scopes.Viewer`,
bounded by :class:`MemoryLimits`.

Nothing is dropped silently: an entry over ``max_entry_chars`` is refused with its length,
and a scope holding ``max_entries_per_scope`` entries refuses the next one with
:data:`FULL` — the model is told to consolidate (merge related entries, forget stale
ones) and save again. The same text (case and spacing aside) already visible to the
writer is not stored twice (:data:`DUPLICATE`).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.memory.scopes import Viewer
from core.store.memory import MemoryEntry, MemoryStore, normalised

FULL = (
    "Memory {scope} is full ({limit} entries): nothing was saved. Consolidate first — "
    "memory_search for related entries, save one merged entry, memory_forget the ones it "
    "replaces or that are no longer true — then save again."
)
TOO_LONG = "Not saved: {length} characters; an entry holds at most {limit}. Save it shorter."
DUPLICATE = "Already remembered as #{id}; not saved twice."
OFF = "Not saved: this person turned memory off (/memory on turns it on again)."
NOBODY = "Not saved: nobody is speaking in this conversation."
EMPTY = "Not saved: the text is empty."
SAVED = "Saved as #{id} ({where})."
PRIVATE_NOTE = " It is private to them: not shown in this chat unless they /memory share on."


@dataclass(frozen=True, slots=True)
class MemoryLimits:
    """``[memory]``: the bounds of every scope, and of the prompt's section."""

    max_entries_per_scope: int = 200
    max_entry_chars: int = 1000
    prompt_tokens: int = 1500


class MemoryBook:
    """The memory operations a turn may do, each within its viewer."""

    def __init__(self, memory: MemoryStore, limits: MemoryLimits) -> None:
        self.memory = memory
        self.limits = limits

    async def save(self, viewer: Viewer, text: str, scope: str) -> tuple[str, bool]:
        """Save ``text``; the tool's answer and whether it is an error."""
        text = normalised(text)
        owner = viewer.owner_for(scope)
        refusal = self._refusal(viewer, text, owner)
        if refusal is not None or owner is None:
            return refusal or NOBODY, True
        same = await self.memory.duplicate_of((*viewer.visible, *viewer.own_owners), text)
        if same is not None:
            return DUPLICATE.format(id=same.id), False
        if await self.memory.count_memory(owner) >= self.limits.max_entries_per_scope:
            return FULL.format(scope=where(owner), limit=self.limits.max_entries_per_scope), True
        saved = await self.memory.add_memory(owner, text)
        if saved is None:
            return DUPLICATE.format(id="?"), False
        note = PRIVATE_NOTE if viewer.chat is not None and owner != viewer.chat else ""
        return SAVED.format(id=saved.id, where=where(owner)) + note, False

    def _refusal(self, viewer: Viewer, text: str, owner: str | None) -> str | None:
        if not text:
            return EMPTY
        if len(text) > self.limits.max_entry_chars:
            return TOO_LONG.format(length=len(text), limit=self.limits.max_entry_chars)
        if owner is None:
            return NOBODY
        return OFF if viewer.off and owner.startswith("person:") else None

    async def search(self, viewer: Viewer, query: str, limit: int = 10) -> list[MemoryEntry]:
        return await self.memory.search_memory(viewer.visible, query, limit)

    async def forget(self, viewer: Viewer, entry_id: int) -> bool:
        return await self.memory.forget_memory(viewer.own_owners, entry_id)

    async def in_prompt(self, viewer: Viewer) -> list[MemoryEntry]:
        """The entries the session's prompt starts with (before the token cap)."""
        cap = self.limits.max_entries_per_scope * max(len(viewer.visible), 1)
        return await self.memory.memories_of(viewer.visible, cap)


def where(owner: str) -> str:
    """An owner as the model and the person read it."""
    kind, _, name = owner.partition(":")
    if kind == "chat":
        return "this chat"
    if kind == "profile":
        return "everyone"
    return f"person {name}"
