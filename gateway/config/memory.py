"""``[memory]``: what the agent remembers across sessions (README "Memory", issue 32).

Off unless ``enabled = true``: then each profile's agent gets the ``memory_save``,
``memory_search`` and ``memory_forget`` tools, the context tier of a new session holds
the speaker's and the chat's entries, and ``/memory`` answers in chats.
"""

from __future__ import annotations

from adapters.config import Flag, PositiveInt, Section


class MemorySection(Section):
    enabled: Flag = False
    """Memory on: tools, the prompt section and ``/memory``."""
    max_entries_per_scope: PositiveInt = 200
    """A person's or a chat's entries at most; a full scope tells the model to consolidate."""
    max_entry_chars: PositiveInt = 1000
    """One entry's length at most (longer ones are refused, never cut)."""
    prompt_tokens: PositiveInt = 1500
    """The memory section of a session's prompt at most (estimated tokens)."""
