"""The messages of one running turn, each with the id it was stored under.

A transcript holds the session's active history (oldest first), then this turn's user
message, then everything the turn adds. It renders the request for the model:

* the system prompt (stable + context tiers, byte-identical across turns) goes first and is
  never stored;
* the ``pre_llm_call`` context goes in front of this turn's user message and the volatile
  tier (the clock note) after it, *for the model only* — the stored user message never
  contains either (``docs/turn-loop.md`` §2, steps 3 and 4);
* image references (``workspace:`` URLs, :mod:`core.agent.attachment_content`) of this
  turn's user message are sent as the ``data:`` URLs of :attr:`Transcript.images`; older
  turns' are left out (their text notes stay): the store never holds the bytes;
* images a tool of this turn returned (:attr:`Entry.images`, read only for a vision model)
  go in a user message right after the turn's tool messages
  (:mod:`core.agent.tool_images`), built for each request; the stored tool message keeps
  its text note.

History from a process that died mid-tools may hold an assistant tool call without its
result; providers reject such a request, so :func:`heal` adds a placeholder result (for the
model only, never stored) instead of losing the session. The placeholder tells what the
call's record (:func:`load_call_records`) knows: it never started, it waited for an
approval that never came, it was started and its outcome is unknown (check before running
it again — never repeat a side-effecting call blindly), or it ended and here is its
recorded result.

An assistant message with neither text nor tool calls (:func:`is_empty_reply`: a grace
call answered with tool calls only, a model that said nothing) is never stored
(:func:`store_reply`) nor sent: :meth:`Transcript.for_model` leaves out any such message a
store still holds from before, since a strict provider rejects the whole request for it
(``docs/turn-loop.md`` §3).

Rows an older version stored that a strict server rejects — tool-call arguments that are
not JSON, a tool result without its call — are repaired in memory on load
(:func:`core.agent.repair.repaired`: ``{}`` is sent, the orphan left out; the store keeps
them). A turn that ended without an answer (stopped, failed, empty) stores no assistant
row; the request puts a fixed "no answer" assistant turn after its user message
(:func:`core.agent.repair.alternating`), so roles always alternate. Both that repair and
the summary's form (:func:`core.agent.context.as_sent`) concern the history: a request with
none before this turn's user message (a new session's first turn) holds only what the turn
added — one user message, then the model's calls and their results — and skips them.

A replayed update resumes on its own stored user message (:meth:`Transcript.resume_at`):
the turn sees the history up to that message and what its own turn already did, never the
turns that came after it (those stay in the store).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from core.agent.attachment_content import around, for_request
from core.agent.context import as_sent
from core.agent.prompt import user_for_model
from core.agent.repair import alternating, repaired
from core.agent.scope import TurnScope
from core.agent.tool_images import ToolImage, latest, with_tool_images
from core.store.base import Store, StoredMessage, ToolCallRecord
from core.types import ChatMessage, Content, ToolCall

CallRecords = Mapping[tuple[str, str], ToolCallRecord]
"""Tool-call records by ``(turn id, call id)``."""


@dataclass(slots=True)
class Entry:
    message: ChatMessage
    stored_id: int | None
    turn_id: str | None = None
    images: tuple[ToolImage, ...] = ()
    """Images this tool result returned, for a vision model: memory only, never stored."""


class Transcript:
    def __init__(
        self,
        system_prompt: str,
        history: list[StoredMessage],
        calls: CallRecords | None = None,
    ) -> None:
        """``calls``: the records of the history's unanswered tool calls, for the
        placeholders (:func:`load_call_records`); a call without one never started."""
        self.system_prompt = system_prompt
        self.entries: list[Entry] = []
        if history:  # a new session's first turn has nothing to repair or heal
            entries = repaired([Entry(m.message, m.id, m.turn_id) for m in history])
            self.entries = heal(entries, calls or {})
        self.turn_start = len(self.entries)
        self.model_context = ""
        """``pre_llm_call`` context, sent in front of the user message, never stored."""
        self.volatile_note = ""
        """The volatile tier (:func:`core.agent.prompt.clock_note`), sent after the user
        message, never stored."""
        self.images: dict[str, str] = {}
        """This turn's image references as ``data:`` URLs, sent in the user message only
        (:mod:`core.agent.attachment_content`); older turns send their notes."""
        self.tool_images = False
        """A tool result of this transcript returned images (then every request looks
        for them, :meth:`_with_tool_images`)."""

    def add(
        self, message: ChatMessage, stored_id: int | None, images: tuple[ToolImage, ...] = ()
    ) -> Entry:
        entry = Entry(message, stored_id, images=images)
        self.entries.append(entry)
        if images:
            self.tool_images = True
        return entry

    def resume_at(self, stored_id: int) -> Entry | None:
        """Make the history's message ``stored_id`` this turn's user message (a replayed
        update): the turn continues after what its own turn already did, and every later
        turn leaves this transcript (not the store). None when the history does not hold it.
        """
        for index, entry in enumerate(self.entries):
            if entry.stored_id == stored_id:
                del self.entries[turn_end(self.entries, index) :]
                self.turn_start = index
                return entry
        return None

    def replace_head(self, count: int, summary: Entry) -> None:
        """Put the compaction ``summary`` in place of the first ``count`` entries, which
        all come before this turn (:mod:`core.agent.compaction`)."""
        assert count <= self.turn_start
        self.entries[:count] = [summary]
        self.turn_start -= count - 1

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
        """The request's messages: the system prompt, then every entry but an empty reply."""
        system = ChatMessage(role="system", content=self.system_prompt)
        messages = [
            for_request(e.message, self.images if i == self.turn_start else {})
            if isinstance(e.message.content, list)  # image parts: resolved or left out
            else e.message
            for i, e in enumerate(self.entries)
        ]
        if (self.model_context or self.volatile_note) and len(messages) > self.turn_start:
            user = messages[self.turn_start]
            context, note = self.model_context, self.volatile_note
            content: Content
            if isinstance(user.content, list):
                content = around(user.content, context, note)
            else:
                content = user_for_model(user.text(), context, note)
            messages[self.turn_start] = replace(user, content=content)
        sent = [m for m in messages if m.role != "assistant" or not is_empty_reply(m)]
        if self.turn_start:  # only a history holds summaries and turns left unanswered
            sent = alternating(as_sent(sent))
        return [system, *(self._with_tool_images(sent) if self.tool_images else sent)]

    def _with_tool_images(self, sent: list[ChatMessage]) -> list[ChatMessage]:
        """``sent`` with this turn's tool images after its tool messages (added after
        :func:`alternating`, which would take them for a user message left unanswered)."""
        returned = [(e.message, e.images) for e in self.entries[self.turn_start :] if e.images]
        return with_tool_images(sent, latest(returned)) if returned else sent


def is_empty_reply(message: ChatMessage) -> bool:
    """An assistant message with neither text nor tool calls: never stored nor sent."""
    return message.role == "assistant" and not message.tool_calls and not message.text().strip()


async def store_reply(
    store: Store, scope: TurnScope, transcript: Transcript, message: ChatMessage
) -> Entry | None:
    """Store an assistant message of the turn and add it; an empty one is neither (None)."""
    if is_empty_reply(message):
        return None
    stored_id = await store.append_message(scope.session_id, scope.turn_id, message)
    return transcript.add(message, stored_id)


async def replace_reply_text(
    store: Store, scope: TurnScope, transcript: Transcript, entry: Entry | None, text: str
) -> None:
    """Put ``text`` (what ``transform_llm_output`` made of the reply) in place of the stored
    reply ``entry``; store it afresh when the reply was empty and so never stored."""
    if entry is None:
        await store_reply(store, scope, transcript, ChatMessage(role="assistant", content=text))
        return
    entry.message.content = text
    assert entry.stored_id is not None
    await store.update_message_content(entry.stored_id, text)


def turn_end(entries: Sequence[Entry], index: int) -> int:
    """Where the turn whose user message is ``entries[index]`` ends: at the next stored user
    message (the next turn), else at the end."""
    for later in range(index + 1, len(entries)):
        entry = entries[later]
        if entry.message.role == "user" and entry.stored_id is not None:
            return later
    return len(entries)


NEVER_STARTED = (
    "No result: the gateway restarted before this call started. It did not run and had no "
    "effect; call it again if it is still needed."
)
NEVER_APPROVED = (
    "No result: this call was waiting for approval when the gateway restarted. It was never "
    "approved and did not run; call it again if it is still needed (approval is asked again)."
)
OUTCOME_UNKNOWN = (
    "No result: this call was started, but the gateway restarted before it finished, so its "
    "outcome is unknown. Check what it did before running it again; do not repeat a "
    "side-effecting call blindly."
)
_ENDED = {
    "finished": "it finished",
    "blocked": "it was blocked by a policy and did not run",
    "denied": "it was denied and did not run",
    "timed_out": "its approval timed out and it did not run",
    "cancelled": "it was stopped before it finished; check what it did before running it again",
}


def restart_result(record: ToolCallRecord | None) -> str:
    """What the model is told about a tool call left without a result by a restart."""
    if record is None or record.status == "requested":
        return NEVER_STARTED
    if record.status == "awaiting_approval":
        return NEVER_APPROVED
    if record.status == "started":
        return OUTCOME_UNKNOWN
    how = _ENDED[record.status]
    if record.status == "cancelled" and record.approval_outcome == "cancelled":
        how = "its approval was cancelled and it did not run"
    return f"Recorded before the gateway restarted: {how}. Its result:\n{record.result}"


def heal(entries: list[Entry], calls: CallRecords | None = None) -> list[Entry]:
    """Give every tool call of the history a result (placeholders are not stored)."""
    known = calls or {}
    healed: list[Entry] = []
    for index, entry in enumerate(entries):
        healed.append(entry)
        for call in _unanswered(entries, index):
            text = restart_result(known.get((entry.turn_id or "", call.id)))
            placeholder = ChatMessage(
                role="tool", content=text, tool_call_id=call.id, name=call.name
            )
            healed.append(Entry(placeholder, None, entry.turn_id))
    return healed


def _unanswered(entries: Sequence[Entry], index: int) -> list[ToolCall]:
    answered: set[str] = set()
    for entry in entries[index + 1 :]:
        if entry.message.role != "tool":
            break
        answered.add(entry.message.tool_call_id or "")
    return [call for call in entries[index].message.tool_calls if call.id not in answered]


async def load_call_records(store: Store, history: Sequence[StoredMessage]) -> CallRecords:
    """The records of the history's unanswered tool calls (only their turns are read)."""
    entries = [Entry(m.message, m.id, m.turn_id) for m in history]
    turns = {
        entry.turn_id
        for index, entry in enumerate(entries)
        if entry.message.tool_calls and entry.turn_id is not None and _unanswered(entries, index)
    }
    found: dict[tuple[str, str], ToolCallRecord] = {}
    for turn_id in sorted(turns):
        for record in await store.list_tool_calls(turn_id):
            found[(turn_id, record.call_id)] = record  # a reused call id: the latest row
    return found
