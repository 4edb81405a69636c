"""The messages of one running turn, each with the id it was stored under.

A transcript holds the session's active history (oldest first), then this turn's user
message, then everything the turn adds. It renders the request for the model:

* the system prompt (stable + context + volatile tiers) goes first and is never stored;
* the ``pre_llm_call`` context goes in front of this turn's user message *for the model
  only* — the stored user message never contains it (seed 000 step 4).

History from a process that died mid-tools may hold an assistant tool call without its
result; providers reject such a request, so :func:`heal` adds a placeholder result (for the
model only, never stored) instead of losing the session.
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
        self.entries = heal([Entry(m.message, m.id) for m in history])
        self.turn_start = len(self.entries)
        self.model_context = ""
        """``pre_llm_call`` context, sent in front of the user message, never stored."""

    def add(self, message: ChatMessage, stored_id: int | None) -> Entry:
        entry = Entry(message, stored_id)
        self.entries.append(entry)
        return entry

    def resume_at(self, stored_id: int) -> Entry | None:
        """Make the history's message ``stored_id`` this turn's user message (a replayed
        update): the turn continues after it. None when the history does not hold it."""
        for index, entry in enumerate(self.entries):
            if entry.stored_id == stored_id:
                self.turn_start = index
                return entry
        return None

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


UNANSWERED_RESULT = "No result: the turn ended before this tool finished."


def heal(entries: list[Entry]) -> list[Entry]:
    """Give every tool call of the history a result (placeholders are not stored)."""
    healed: list[Entry] = []
    for index, entry in enumerate(entries):
        healed.append(entry)
        answered = _answered_after(entries, index)
        for call in entry.message.tool_calls:
            if call.id not in answered:
                placeholder = ChatMessage(
                    role="tool", content=UNANSWERED_RESULT, tool_call_id=call.id, name=call.name
                )
                healed.append(Entry(placeholder, None))
    return healed


def _answered_after(entries: list[Entry], index: int) -> set[str]:
    answered: set[str] = set()
    for entry in entries[index + 1 :]:
        if entry.message.role != "tool":
            break
        answered.add(entry.message.tool_call_id or "")
    return answered
