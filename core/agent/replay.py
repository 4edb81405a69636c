"""Replaying an inbound update exactly.

An update is marked handled only after its reply was delivered, so a process that dies in
between (the reply sent, the update not yet marked) replays the update on its next start.
Its user message is already stored (``UserMessage.origin``, found with
``Store.find_message_by_origin``); what happens next depends on how far its turn got:

* **its answer is stored** — the turn that began with that message ended with an assistant
  message without tool calls: :func:`stored_answer` finds it and :func:`redelivery` gives it
  back as the turn's result, so the same answer is delivered again and the model is never
  called (no new turn is started);
* **unfinished** — the turn resumes on its own user message with only the history up to it
  and what its own turn already did (:meth:`core.agent.transcript.Transcript.resume_at`);
  later turns stay in the store, out of its transcript.

A turn's messages run from its user message to the next stored user message: the messages a
resumed turn adds carry its new turn id, so position, not turn id, tells which turn they
continue.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.agent.turn import TurnResult
from core.store.base import Store, StoredMessage
from core.types import ExitReason, TurnStatus


def stored_answer(history: Sequence[StoredMessage], user_id: int) -> StoredMessage | None:
    """The final answer of the turn whose user message is ``user_id``, if it is stored."""
    start = next((i for i, m in enumerate(history) if m.id == user_id), None)
    if start is None:
        return None
    end = start + 1
    while end < len(history) and history[end].message.role != "user":
        end += 1
    last = history[end - 1].message
    if end - 1 == start or last.role != "assistant" or last.tool_calls:
        return None
    return history[end - 1] if last.text().strip() else None


async def redelivery(store: Store, answer: StoredMessage) -> TurnResult:
    """The result of the turn that produced ``answer``, to deliver it again.

    Status and exit reason are that turn's record, unless the record is missing or a crash
    left it ``running``/``failed`` after the answer was stored: then ``completed``."""
    record = await store.get_turn(answer.turn_id) if answer.turn_id else None
    status: TurnStatus = "completed"
    exit_reason: ExitReason = "text_response"
    iterations = 0
    if record is not None:
        iterations = record.iterations
        if record.status not in ("running", "failed") and record.exit_reason is not None:
            status, exit_reason = record.status, record.exit_reason
    return TurnResult(
        turn_id=answer.turn_id or "",
        session_id=answer.session_id,
        status=status,
        exit_reason=exit_reason,
        reply=answer.message.text(),
        iterations=iterations,
    )
