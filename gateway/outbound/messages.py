"""Every short text the gateway says in a chat, in one table.

The command path (``/approve``, ``/steer`` …) and the button path (a press on a card) word
the same outcome the same way: both read :data:`RESOLVE_ANSWERS` and :data:`ACKS`.
"""

from __future__ import annotations

from typing import Final

from core.dispatcher import StopOutcome

STOPPED: Final = "⏹ Stopped."
NOTHING_TO_STOP: Final = "Nothing to stop."
STEERED: Final = "⏩ Steer queued — lands after the current tool."
REDIRECTED: Final = "↪️ Redirect queued — the task is corrected before its next step."
QUEUED: Final = "⏳ Queued — I'll get to it after the current task."
NEW_SESSION: Final = "🆕 Fresh start — your next message begins a new session."
NO_PENDING: Final = "No pending request."
APPROVED: Final = "✅ Approved."
DENIED: Final = "❌ Denied."
STRANGER: Final = "Sorry — you are not allowed to use this bot."
NO_LONGER_VALID: Final = "This button is no longer valid."
SOMETHING_WENT_WRONG: Final = "Something went wrong."
UNKNOWN_APPROVAL: Final = "No such pending request."
NOTHING_TO_COMPACT: Final = "Nothing to compact: the conversation is short enough."
COMPACT_WHEN_IDLE: Final = "A task is running; send /compact again when it is done."
COMPACT_FAILED: Final = "The summary could not be made (the model did not answer); nothing changed."

ACKS: Final[dict[str, str]] = {
    "queued": QUEUED,
    "steered": STEERED,
    "interrupted_and_queued": "↪️ Interrupting the current task — your message is next.",
    "rejected_queue_full": "🚫 Too many messages waiting — try again when I'm done.",
    "rejected_shutting_down": "🚫 I'm shutting down — try again in a moment.",
}
"""What a submitted message is told, by :class:`core.dispatcher.SubmitOutcome` kind."""

RESOLVE_ANSWERS: Final[dict[str, str]] = {
    "already_decided": "Already decided.",
    "cancelled_by_restart": "Cancelled: the gateway restarted before this was answered.",
    "unknown": UNKNOWN_APPROVAL,
    "forbidden": "Sorry — only the person who asked (or an approver) can answer this.",
    "invalid": "That is not one of the options — use the buttons.",
}
"""What an answer to an approval is told, by :data:`core.approvals.ResolveResult`."""


def compacted(count: int, use: str | None) -> str:
    """What ``/compact`` says once the older messages are summarised."""
    said = f"🗜 Compacted: {count} older message(s) summarised (kept in the store)."
    return f"{said} {use[:1].upper()}{use[1:]}." if use else said


def usage(command: str) -> str:
    return f"Usage: /{command} <text>"


def unknown_command(name: str) -> str:
    return f"Unknown command /{name} — /help lists what I understand."


def stopped(outcome: StopOutcome) -> str:
    """What ``/stop`` says it ended and what became of the queue (``docs/turn-loop.md`` §13):
    "⏹ Stopped. 2 queued messages were not run." (dropped) or "… will run next." (kept)."""
    if outcome.dropped:
        return f"{STOPPED} {_queued(outcome.dropped)} {_were(outcome.dropped)} not run."
    if outcome.kept:
        return f"{STOPPED} {_queued(outcome.kept)} will run next."
    return STOPPED


def _queued(count: int) -> str:
    return f"{count} queued message{'' if count == 1 else 's'}"


def _were(count: int) -> str:
    return "was" if count == 1 else "were"
