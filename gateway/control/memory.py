"""Memory in the gateway (issue 32, README "Memory"): built only when ``[memory] enabled``.

:class:`MemoryFeature` gives each profile's agent its tools (:mod:`core.tools.memory`) and
its context-tier section (:func:`core.memory.rendering.memory_section`, frozen with the
session's prompt), and answers ``/memory``:

* ``/memory`` — what is remembered about the sender (listed in a direct chat only: in a
  shared chat it is counted, never shown), and this chat's entries for its approvers;
* ``/memory forget ID`` / ``/memory forget all`` — the sender's own entries (a chat's
  entry: its approvers only);
* ``/memory off`` / ``on`` — nothing is saved for the sender, nothing of theirs is read;
* ``/memory share on`` / ``off`` — in a shared chat: the sender's entries may be seen here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from adapters.base import InboundEvent
from core.agent.prompt import ContextSection
from core.memory.book import MemoryBook, MemoryLimits
from core.memory.rendering import line, memory_section
from core.memory.scopes import chat_of, linked_identities, person_owner, viewer_of
from core.store.base import SessionRecord, Store
from core.store.memory import MemoryStore, memory_store
from core.tools.base import Tool
from core.tools.memory import memory_tools
from gateway.config.memory import MemorySection
from gateway.control.access import qualified
from gateway.control.commands import CommandHandler, Reply

USAGE = "🧠 /memory, /memory forget ID|all, /memory off|on, /memory share on|off"
LIST_LIMIT = 50


def limits_of(section: MemorySection) -> MemoryLimits:
    return MemoryLimits(
        section.max_entries_per_scope, section.max_entry_chars, section.prompt_tokens
    )


@dataclass(frozen=True, slots=True)
class MemoryFeature:
    store: Store
    book: MemoryBook

    @classmethod
    def build(cls, store: Store, section: MemorySection) -> MemoryFeature:
        return cls(store, MemoryBook(memory_store(store), limits_of(section)))

    @property
    def memory(self) -> MemoryStore:
        return self.book.memory

    def tools(self, profile: str) -> list[Tool]:
        return memory_tools(self.store, self.book, profile)

    def section(self, profile: str) -> ContextSection:
        async def render(session: SessionRecord, speaker: str | None) -> str:
            viewer = await viewer_of(self.store, self.memory, session.key, speaker, profile)
            entries = await self.book.in_prompt(viewer)
            return memory_section(entries, self.book.limits.prompt_tokens)

        return render

    def commands(self, approvers: Callable[[str], Collection[str]]) -> dict[str, CommandHandler]:
        return {"memory": MemoryCommands(self, approvers).command}


@dataclass(frozen=True, slots=True)
class MemoryCommands:
    feature: MemoryFeature
    approvers: Callable[[str], Collection[str]]

    async def command(self, event: InboundEvent, session_key: str, args: str) -> Reply:
        me = qualified(event.platform, event.sender.id)
        words = args.lower().split()
        chat = chat_of(session_key, me)
        admin = chat is not None and me in self.approvers(session_key)
        if not words:
            return await self._list(me, chat, admin)
        if words[0] == "forget" and len(words) == 2:
            return await self._forget(me, chat if admin else None, words[1])
        if words[0] in ("off", "on") and len(words) == 1:
            return await self._switch(me, words[0] == "off")
        if words[:1] == ["share"] and len(words) == 2 and words[1] in ("on", "off"):
            return await self._share(me, chat, words[1] == "on")
        return USAGE

    async def _mine(self, me: str) -> tuple[str, ...]:
        identities = await linked_identities(self.feature.store, me)
        return tuple(person_owner(i) for i in identities)

    async def _list(self, me: str, chat: str | None, admin: bool) -> str:
        memory = self.feature.memory
        mine = await memory.memories_of(await self._mine(me), LIST_LIMIT)
        if chat is None:
            lines = [line(e) for e in mine] or ["(nothing)"]
            return "\n".join(["🧠 What I remember about you:", *lines])
        parts = [f"🧠 {len(mine)} entries about you: send /memory in a direct chat to see them."]
        if admin:
            here = await memory.memories_of([chat], LIST_LIMIT)
            parts += ["This chat:", *([line(e) for e in here] or ["(nothing)"])]
        return "\n".join(parts)

    async def _forget(self, me: str, chat: str | None, what: str) -> str:
        owners = (*await self._mine(me), *((chat,) if chat else ()))
        memory = self.feature.memory
        if what == "all":
            count = await memory.forget_all_memory(await self._mine(me))
            return f"🧠 Forgot everything about you ({count} entries)."
        entry_id = int(what.lstrip("#")) if what.lstrip("#").isdigit() else None
        if entry_id is not None and await memory.forget_memory(owners, entry_id):
            return f"🧠 Forgot #{entry_id}."
        return f"🧠 No entry {what} you may forget."

    async def _switch(self, me: str, off: bool) -> str:
        memory = self.feature.memory
        for identity in await linked_identities(self.feature.store, me):
            await memory.set_memory_setting(identity, "off", "", on=off)
        if off:
            return "🧠 Memory off: nothing new is remembered about you, nothing is recalled."
        return "🧠 Memory on."

    async def _share(self, me: str, chat: str | None, on: bool) -> str:
        if chat is None:
            return "🧠 Sharing is for group chats: send /memory share on there."
        await self.feature.memory.set_memory_setting(me, "share", chat, on=on)
        if on:
            return "🧠 What I remember about you may now be used in this chat."
        return "🧠 What I remember about you stays out of this chat."
