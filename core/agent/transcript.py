"""The messages of one running turn, each with the id it was stored under.

A transcript holds the session's active history (oldest first), then this turn's user
message, then everything the turn adds. It renders the request for the model:

* the system prompt (stable + context + volatile tiers) goes first and is never stored;
* the ``pre_llm_call`` context goes in front of this turn's user message *for the model
  only* — the stored user message never contains it (seed 000 step 4).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from core.store.base import StoredMessage
from core.types import ChatMessage


@dataclass(slots=True)
class Entry:
    message: ChatMessage
    stored_id: int | None


class Transcript:
    def __init__(self, system_prompt: str, history: list[StoredMessage]) -> None:
        self.system_prompt = system_prompt
        self.entries = [Entry(m.message, m.id) for m in history]
        self.turn_start = len(self.entries)
        self.model_context = ""
        """``pre_llm_call`` context, sent in front of the user message, never stored."""

    def add(self, message: ChatMessage, stored_id: int | None) -> Entry:
        entry = Entry(message, stored_id)
        self.entries.append(entry)
        return entry

    @property
    def user_entry(self) -> Entry:
        """This turn's user message (the first entry added after the history)."""
        return self.entries[self.turn_start]

    def turn_messages(self) -> list[ChatMessage]:
        return [e.message for e in self.entries[self.turn_start :]]

    def latest_tool_entry(self) -> Entry | None:
        """The most recent tool-result message of *this* turn, if any."""
        for entry in reversed(self.entries[self.turn_start :]):
            if entry.message.role == "tool":
                return entry
        return None

    def for_model(self) -> list[ChatMessage]:
        system = ChatMessage(role="system", content=self.system_prompt)
        messages = [e.message for e in self.entries]
        if self.model_context and len(messages) > self.turn_start:
            user = messages[self.turn_start]
            prefixed = f"{self.model_context}\n\n{user.text()}"
            messages[self.turn_start] = replace(user, content=prefixed)
        return [system, *messages]
