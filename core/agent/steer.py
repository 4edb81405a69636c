"""Mid-turn injection: ``/steer``, redirect and engine notes (seed 001 §3.3, §3.4).

The channel is cache-safe: it never adds a message. Before each model call the loop calls
:meth:`SteerChannel.deliver`, which

1. drains a pending **redirect** and folds it into this turn's original user message —
   ``"<text>\\n\\nUser correction during the turn: <correction>"`` — in memory *and* in the
   store at once (so it survives compaction and restarts). If a tool result exists in this
   turn the correction is also appended there, so the model sees it at the end of the
   context right now;
2. drains the pending **steer** and appends it with a visible marker
   (``"\\n\\n[User steer during the turn]: <text>"``) to the most recent tool-result message
   of this turn — to the string content, or as a new text block for list content — and
   updates that stored message. A user message is never added: it would break role
   alternation and the prompt cache;
3. appends engine **notes** (the wall-clock wrap-up reminder, the grace-call note) the same
   way.

When this turn has no tool result yet, the steer is put back on the ``TurnControl``
(``restore_steer``) and notes stay queued here: both land after the next batch of tool
results.
"""

from __future__ import annotations

from core.agent.control import TurnControl
from core.agent.transcript import Entry, Transcript
from core.store.base import Store
from core.types import ChatMessage

CORRECTION_PREFIX = "User correction during the turn: "


def format_steer_marker(text: str) -> str:
    return f"\n\n[User steer during the turn]: {text}"


def format_note_marker(text: str) -> str:
    return f"\n\n{text}"


def append_marker(message: ChatMessage, marker: str) -> None:
    """Append to string content, or add a text block to list content."""
    content = message.content
    if isinstance(content, list):
        message.content = [*content, {"type": "text", "text": marker}]
    else:
        message.content = (content or "") + marker


def with_correction(text: str, correction: str) -> str:
    return f"{text}\n\n{CORRECTION_PREFIX}{correction}"


class SteerChannel:
    def __init__(self, control: TurnControl, transcript: Transcript, store: Store) -> None:
        self._control = control
        self._transcript = transcript
        self._store = store
        self._notes: list[str] = []

    def add_note(self, text: str) -> None:
        """Queue an engine note for the latest tool result (delivered by :meth:`deliver`)."""
        self._notes.append(format_note_marker(text))

    async def deliver(self) -> None:
        redirect = self._control.drain_redirect()
        if redirect:
            await self._apply_redirect(redirect)
        steer = self._control.drain_steer()
        markers = [*self._notes, *([format_steer_marker(steer)] if steer else [])]
        if not markers:
            return
        entry = self._transcript.latest_tool_entry()
        if entry is None:
            if steer:
                self._control.restore_steer(steer)
            return
        self._notes.clear()
        await self._append(entry, "".join(markers))

    async def _apply_redirect(self, correction: str) -> None:
        user = self._transcript.user_entry
        user.message.content = with_correction(user.message.text(), correction)
        if user.stored_id is not None:
            await self._store.update_message_content(user.stored_id, user.message.text())
        if self._transcript.latest_tool_entry() is not None:
            note = f"[User correction during the turn]: {correction}"
            self._notes.append(format_note_marker(note))

    async def _append(self, entry: Entry, marker: str) -> None:
        append_marker(entry.message, marker)
        if entry.stored_id is not None:
            await self._store.update_message_content(entry.stored_id, entry.message.text())
