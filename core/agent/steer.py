"""Mid-turn injection: ``/steer``, redirect and engine notes (``docs/turn-loop.md`` §10, §11).

The channel is cache-safe: it never adds a message.

* A **redirect** is recorded the moment it arrives: the turn's :class:`RedirectRecorder`,
  told by ``TurnControl.redirect`` while the loop runs, starts a task that calls
  :func:`record_redirects` (a turn with no redirect makes no task), which appends
  ``"User correction during the turn: <text>"`` to this turn's original user message, in
  memory *and* in the store (so it survives compaction, restarts and a turn that makes no
  further model call).
* Before each model call the loop calls :meth:`SteerChannel.deliver`, which records any
  redirect the watcher has not reached yet, then

  1. drains the pending redirect for the model: if a tool result exists in this turn the
     correction is also appended there, so the model sees it at the end of the context;
  2. drains the pending **steer** and appends it with a visible marker
     (``"\\n\\n[User steer during the turn]: <text>"``) to the most recent tool-result
     message of this turn — to the string content, or as a new text block for list
     content — and updates that stored message. A user message is never added: it would
     break role alternation and the prompt cache;
  3. appends engine **notes** (the wall-clock wrap-up reminder, the grace-call note) the
     same way.

When this turn has no tool result yet, the steer is put back on the ``TurnControl``
(``restore_steer``) and notes stay queued here: both land after the next batch of tool
results. A steer or redirect still pending when the turn ends is taken by the Dispatcher
(``TurnControl.drain_leftovers``) and runs as the next turn — it is never lost.
"""

from __future__ import annotations

import asyncio
import logging

from core.agent.control import TurnControl
from core.agent.transcript import Entry, Transcript
from core.store.base import Store
from core.types import ChatMessage

logger = logging.getLogger(__name__)

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


def format_correction_marker(correction: str) -> str:
    return f"\n\n{CORRECTION_PREFIX}{correction}"


async def record_redirects(control: TurnControl, transcript: Transcript, store: Store) -> None:
    """Append every redirect not yet recorded to this turn's user message, and store it."""
    for correction in control.drain_unrecorded():
        user = transcript.user_entry
        append_marker(user.message, format_correction_marker(correction))
        await store_content(store, user)
    if not control.redirect_arrived.is_set():
        control.redirect_recorded.set()


class RedirectRecorder:
    """Records each redirect as it arrives while the loop runs: :meth:`arrived` (the
    ``TurnControl.recorder``) starts one task at a time that records until none is left;
    :meth:`stop` ends it with the loop. A failed write is logged."""

    def __init__(
        self, control: TurnControl, transcript: Transcript, store: Store, name: str
    ) -> None:
        self._control, self._transcript, self._store = control, transcript, store
        self._name = name
        self._task: asyncio.Task[None] | None = None

    def arrived(self) -> None:
        """A redirect came (sync, from any task): record it now, unless a recording task
        is under way (it takes this one too before it ends)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._record(), name=self._name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})

    async def _record(self) -> None:
        while self._control.unrecorded:
            try:
                await record_redirects(self._control, self._transcript, self._store)
            except Exception:
                logger.exception("redirect could not be stored with the user message")


async def store_content(store: Store, entry: Entry) -> None:
    """Write an entry's changed content back to its stored message, as it is (a string or
    a list of blocks — multimodal content is never flattened)."""
    if entry.stored_id is not None:
        await store.update_message_content(entry.stored_id, entry.message.content)


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
        """The steer check before a model call: redirects recorded and told, steer lines
        and notes appended to the latest tool result; nothing pending, nothing done."""
        control = self._control
        if not (control.unrecorded or control.redirects or control.steers or self._notes):
            return
        if control.unrecorded:
            await record_redirects(control, self._transcript, self._store)
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
        """The user message already carries it (recorded on arrival); tell the model now."""
        if self._transcript.latest_tool_entry() is not None:
            note = f"[User correction during the turn]: {correction}"
            self._notes.append(format_note_marker(note))

    async def _append(self, entry: Entry, marker: str) -> None:
        append_marker(entry.message, marker)
        await store_content(self._store, entry)
