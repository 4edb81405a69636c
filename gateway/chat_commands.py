"""What each chat command does. All of them act at once (the control plane).

Replies are short plain-text notices; ``None`` means the command answers nothing itself
(e.g. ``/steer`` with no running turn becomes an ordinary message, acknowledged as such).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Protocol

from adapters.base import InboundEvent
from core.agent.profile import BusyPolicy
from core.approvals import Approvals, ResolveOutcome
from core.approver import ApprovalRequest
from core.dispatcher import Dispatcher
from core.store.base import Store
from gateway.commands import canonical, help_text

logger = logging.getLogger(__name__)

Reply = str | None


class SubmitText(Protocol):
    """Start or queue a turn with ``text`` (the router's ``submit_text``)."""

    def __call__(
        self, event: InboundEvent, text: str, *, policy: BusyPolicy | None = None
    ) -> Awaitable[Reply]: ...


SHORT_ID = 8
MIN_ID_PREFIX = 4

STOPPED = "⏹ Stopped."
NOTHING_TO_STOP = "Nothing to stop."
STEER_QUEUED = "⏩ Steer queued — lands after the current tool."
REDIRECT_QUEUED = "↪️ Redirect queued — the task is corrected before its next step."
NEW_SESSION = "🆕 Fresh start — your next message begins a new session."
NO_PENDING = "No pending request."
RESOLVE_REPLIES = {
    "already_decided": "Already decided.",
    "unknown": "No pending request with that id.",
    "forbidden": "Sorry — only the person who asked (or an approver) can answer this.",
    "invalid": "That request needs one of its options — use the buttons.",
}


def short_id(approval_id: str) -> str:
    """The form shown on cards and accepted by ``/approve`` and ``/deny``."""
    return approval_id[:SHORT_ID]


class ChatCommands:
    def __init__(
        self, dispatcher: Dispatcher, approvals: Approvals, store: Store, submit: SubmitText
    ) -> None:
        self._dispatcher, self._approvals, self._store = dispatcher, approvals, store
        self._submit = submit

    async def run(self, event: InboundEvent) -> Reply:
        name = canonical(event.command or "")
        handler = getattr(self, f"_cmd_{name}", None)
        if handler is None:
            return f"Unknown command /{name} — /help lists what I understand."
        reply: Reply = await handler(event, str(event.session_key), event.args.strip())
        return reply

    async def _cmd_start(self, event: InboundEvent, key: str, args: str) -> Reply:
        return f"👋 Hi {event.sender.name}! Send me a message and I'll get to work. /help for more."

    async def _cmd_help(self, event: InboundEvent, key: str, args: str) -> Reply:
        return help_text()

    async def _cmd_stop(self, event: InboundEvent, key: str, args: str) -> Reply:
        return STOPPED if self._dispatcher.stop(key) else NOTHING_TO_STOP

    async def _cmd_new(self, event: InboundEvent, key: str, args: str) -> Reply:
        self._dispatcher.stop(key)
        self._approvals.forget(key)
        session = await self._store.get_active_session(key)
        if session is not None:
            await self._store.end_session(session.id)
        return NEW_SESSION

    async def _cmd_steer(self, event: InboundEvent, key: str, args: str) -> Reply:
        if not args:
            return "Usage: /steer <text>"
        if self._dispatcher.steer(key, args):
            return STEER_QUEUED
        return await self._submit(event, args)

    async def _cmd_redirect(self, event: InboundEvent, key: str, args: str) -> Reply:
        if not args:
            return "Usage: /redirect <text>"
        if self._dispatcher.redirect(key, args):
            return REDIRECT_QUEUED
        return await self._submit(event, args)

    async def _cmd_queue(self, event: InboundEvent, key: str, args: str) -> Reply:
        if not args:
            return "Usage: /queue <text>"
        return await self._submit(event, args, policy="queue")

    async def _cmd_status(self, event: InboundEvent, key: str, args: str) -> Reply:
        status = self._dispatcher.status(key)
        waiting = self._approvals.pending(key)
        parts = ["🟢 Working" if status.running else "💤 Idle"]
        if status.queue_length:
            parts.append(f"{status.queue_length} queued")
        if waiting:
            ids = ", ".join(short_id(r.id) for r in waiting)
            parts.append(f"{len(waiting)} approval(s) waiting: {ids}")
        return " · ".join(parts)

    async def _cmd_approve(self, event: InboundEvent, key: str, args: str) -> Reply:
        return await self._decide(event, key, args, "approved")

    async def _cmd_deny(self, event: InboundEvent, key: str, args: str) -> Reply:
        return await self._decide(event, key, args, "denied")

    async def _decide(
        self, event: InboundEvent, key: str, args: str, outcome: ResolveOutcome
    ) -> Reply:
        """By id (a card's short form or the full id), else the session's oldest request.

        ``/approve <id>`` never falls back to another request: a stale id must not approve
        a newer one. ``/deny <words>`` reads unknown words as the reason.
        """
        first, _, rest = args.partition(" ")
        target = self._by_id(first) if first else None
        if target is None and first and outcome == "approved":
            result = await self._approvals.resolve(first, outcome, event.sender.id)
            return RESOLVE_REPLIES.get(result, NO_PENDING)
        if target is None:
            own = self._approvals.pending(key)
            target, rest = (own[0] if own else None), args
        if target is None:
            return NO_PENDING
        note = rest.strip() or None
        result = await self._approvals.resolve(target.id, outcome, event.sender.id, note=note)
        if result == "resolved":
            return "✅ Approved." if outcome == "approved" else "❌ Denied."
        return RESOLVE_REPLIES.get(result, NO_PENDING)

    def _by_id(self, prefix: str) -> ApprovalRequest | None:
        if len(prefix) < MIN_ID_PREFIX:
            return None
        matches = [r for r in self._approvals.pending() if r.id.startswith(prefix)]
        return matches[0] if len(matches) == 1 else None
