"""What the agent remembers across sessions, scoped to a person or a chat (issue 32,
README "Memory"): :mod:`core.memory.scopes` decides which entries a turn may see and
write, :mod:`core.memory.book` saves (bounded), searches and forgets through the store's
:class:`core.store.memory.MemoryStore`, :mod:`core.memory.rendering` writes the context
tier's section. The tools are :mod:`core.tools.memory`."""
