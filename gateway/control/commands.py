"""What each chat command does. All of them act at once (the control plane).

Replies are short plain-text notices; ``None`` means the command answers nothing itself
(e.g. ``/steer`` with no running turn becomes an ordinary message, acknowledged as such).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from adapters.base import InboundEvent
from core.agent.compaction import Compacted
from core.agent.context import ContextUse
from core.agent.profile import BusyPolicy
from core.agent.turn import UserMessage
from core.approvals import Approvals, ResolveOutcome
from core.approver import ApprovalRequest
from core.dispatcher import Dispatcher, StopOutcome
from core.store.base import Store
from gateway.control.access import user_of
from gateway.control.syntax import canonical, help_text
from gateway.outbound.directory import ChatDirectory
from gateway.outbound.messages import (
    APPROVED,
    COMPACT_WHEN_IDLE,
    DENIED,
    NEW_SESSION,
    NO_PENDING,
    NOTHING_TO_COMPACT,
    NOTHING_TO_STOP,
    REDIRECTED,
    RESOLVE_ANSWERS,
    STEERED,
    UNKNOWN_APPROVAL,
    stopped,
    unknown_command,
    usage,
)

logger = logging.getLogger(__name__)

Reply = str | None

CommandHandler = Callable[[InboundEvent, str, str], Awaitable[Reply]]
"""``handler(event, session_key, args)``: a command a feature module adds
(``ChatCommands(extra=...)``: pairing, links, per-chat settings), run like the built-ins."""


class SessionContext(Protocol):
    """The context of a session key's agent (``docs/turn-loop.md`` §18)."""

    async def context_use(self, session_key: str) -> ContextUse | None: ...

    async def compact(self, session_key: str) -> Compacted | None: ...

    async def settings_status(self, session_key: str) -> str | None:
        """``/status``'s part for the settings the chat made (None: none made;
        :mod:`gateway.turns.settings`)."""
        ...


class Acknowledged(Protocol):
    """Where an acknowledged ``/stop`` is remembered, so the stopped turn's reply is
    suppressed (:class:`gateway.turns.stops.StoppedTurns`)."""

    def acknowledge(self, turn_id: str) -> None: ...


class SubmitText(Protocol):
    """Start or queue a turn with ``text`` (the router's ``submit_text``)."""

    def __call__(
        self, event: InboundEvent, text: str, *, policy: BusyPolicy | None = None
    ) -> Awaitable[Reply]: ...


SHORT_ID = 8
_ID_LIKE = re.compile(rf"[A-Za-z0-9_-]{{{SHORT_ID},}}")
MIN_ID_PREFIX = 4


def looks_like_id(word: str) -> bool:
    """An approval id or its short form: at least ``SHORT_ID`` URL-safe characters."""
    return _ID_LIKE.fullmatch(word) is not None


def short_id(approval_id: str) -> str:
    """The form shown on cards and accepted by ``/approve`` and ``/deny``."""
    return approval_id[:SHORT_ID]


class ChatCommands:
    def __init__(
        self,
        dispatcher: Dispatcher,
        approvals: Approvals,
        store: Store,
        submit: SubmitText,
        stopped: Acknowledged,
        directory: ChatDirectory,
        context: SessionContext | None = None,
        extra: Mapping[str, CommandHandler] | None = None,
    ) -> None:
        self._dispatcher, self._approvals, self._store = dispatcher, approvals, store
        self._submit, self._stopped, self._directory = submit, stopped, directory
        self._context = context
        self.extra: dict[str, CommandHandler] = dict(extra or {})
        """Commands of feature modules by name (a module adds its own at wiring)."""
        self.session_ended: list[Callable[[str], Awaitable[None]]] = []
        """Told of each session ``/new`` ended, by key (per-session MCP servers stop)."""

    async def run(self, event: InboundEvent) -> Reply:
        name = canonical(event.command or "")
        handler = self.extra.get(name) or getattr(self, f"_cmd_{name}", None)
        if handler is None:
            return unknown_command(name)
        reply: Reply = await handler(event, str(event.session_key), event.args.strip())
        return reply

    async def _cmd_start(self, event: InboundEvent, key: str, args: str) -> Reply:
        return f"👋 Hi {event.sender.name}! Send me a message and I'll get to work. /help for more."

    async def _cmd_help(self, event: InboundEvent, key: str, args: str) -> Reply:
        return help_text()

    async def _cmd_stop(self, event: InboundEvent, key: str, args: str) -> Reply:
        outcome = self.stop(key)
        return stopped(outcome) if outcome else NOTHING_TO_STOP

    def stop(self, key: str) -> StopOutcome:
        """What ``/stop`` does, wherever it comes from (the chat, the dashboard): stop the
        running turn and drop the queue (or keep it: the profile's ``stop_clears_queue``);
        the outcome is false when there was nothing to stop.

        A true outcome is a promise that the chat is told "Stopped" (by the caller,
        :func:`gateway.outbound.messages.stopped`): the stopped turn's reply is suppressed even if
        the turn still completes (the stop raced its final answer)."""
        turn_id = self._dispatcher.status(key).turn_id
        outcome = self._dispatcher.stop(key)
        if outcome and turn_id:
            self._stopped.acknowledge(turn_id)
        return outcome

    async def _cmd_new(self, event: InboundEvent, key: str, args: str) -> Reply:
        self._dispatcher.stop(key)
        self._approvals.forget(key)
        session = await self._store.get_active_session(key)
        if session is not None:
            await self._store.end_session(session.id)
        for ended in self.session_ended:
            await ended(key)
        return NEW_SESSION

    async def _cmd_steer(self, event: InboundEvent, key: str, args: str) -> Reply:
        if not args:
            return usage("steer")
        if self._dispatcher.steer(key, args):
            return STEERED
        return await self._submit(event, args)

    async def _cmd_redirect(self, event: InboundEvent, key: str, args: str) -> Reply:
        if not args:
            return usage("redirect")
        if self._dispatcher.redirect(key, args):
            return REDIRECTED
        return await self._submit(event, args)

    async def _cmd_queue(self, event: InboundEvent, key: str, args: str) -> Reply:
        if not args:
            return usage("queue")
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
        use = await self._context.context_use(key) if self._context is not None else None
        if use is not None:
            parts.append(use.describe())
        settings = await self._context.settings_status(key) if self._context else None
        if settings:
            parts.append(settings)
        return " · ".join(parts)

    async def _cmd_compact(self, event: InboundEvent, key: str, args: str) -> Reply:
        """Summarise the session's older turns now, in the session's lane like a turn
        (:func:`compact_now` answers), so ``/stop`` reaches it and a message sent meanwhile
        queues behind it; refused while a turn runs."""
        if self._context is None:
            return NOTHING_TO_COMPACT
        if self._dispatcher.status(key).running:
            return COMPACT_WHEN_IDLE
        sender = user_of(event)
        message = UserMessage("/compact", sender, event.sender.name, command="compact")
        outcome = self._dispatcher.submit(key, message, policy="queue")
        if outcome.handled is not None:
            event.receipt.follow(outcome.handled)
        return None

    async def _cmd_approve(self, event: InboundEvent, key: str, args: str) -> Reply:
        return await self._decide(event, key, args, "approved")

    async def _cmd_deny(self, event: InboundEvent, key: str, args: str) -> Reply:
        return await self._decide(event, key, args, "denied")

    async def _decide(
        self, event: InboundEvent, key: str, args: str, outcome: ResolveOutcome
    ) -> Reply:
        """By id (a card's short form or the full id), else the session's oldest request.

        ``/approve <word>`` always reads the word as an id; for ``/deny`` a first word that
        names a pending approval, or looks like an id, is one. A stale or unknown id answers
        "Already decided." / "No such pending request." and never falls back to another
        request (a stale ``/deny <id>`` must not deny a newer one). Otherwise ``/deny
        <words>`` reads the words as the reason.
        """
        first, _, rest = args.partition(" ")
        named = self._by_id(event, first)
        if first and (outcome == "approved" or named is not None or looks_like_id(first)):
            return await self._decide_by_id(event, first, rest, outcome)
        own = self._approvals.pending(key)
        if not own:
            return NO_PENDING
        return await self._resolve(event, own[0], outcome, args)

    async def _decide_by_id(
        self, event: InboundEvent, given: str, rest: str, outcome: ResolveOutcome
    ) -> Reply:
        target = self._by_id(event, given)
        if target is not None:
            return await self._resolve(event, target, outcome, rest)
        full = self._asked_here(str(event.session_key), given)
        result = await self._approvals.resolve(full, outcome, user_of(event))
        return RESOLVE_ANSWERS.get(result, UNKNOWN_APPROVAL)

    async def _resolve(
        self, event: InboundEvent, target: ApprovalRequest, outcome: ResolveOutcome, note: str
    ) -> Reply:
        by = user_of(event)
        result = await self._approvals.resolve(target.id, outcome, by, note=note.strip() or None)
        if result == "resolved":
            return APPROVED if outcome == "approved" else DENIED
        return RESOLVE_ANSWERS.get(result, UNKNOWN_APPROVAL)

    def _by_id(self, event: InboundEvent, prefix: str) -> ApprovalRequest | None:
        """The one pending request ``prefix`` names among those the caller may see: its
        own session's, and those it may answer (requester or configured approver). Other
        sessions' requests are never matched — an id prefix is no existence oracle."""
        if len(prefix) < MIN_ID_PREFIX:
            return None
        key, by = str(event.session_key), user_of(event)
        visible = [r for r in self._approvals.pending() if self._may_see(r, key, by)]
        matches = [r for r in visible if r.id.startswith(prefix)]
        return matches[0] if len(matches) == 1 else None

    def _may_see(self, request: ApprovalRequest, key: str, by: str) -> bool:
        if request.session_key.partition("/child:")[0] == key or request.requested_by == by:
            return True
        return by in self._approvals.approvers_of(request.session_key)

    def _asked_here(self, session_key: str, given: str) -> str:
        """The full id of a request this session was asked, named by ``given`` (a short
        form of at least ``SHORT_ID`` characters); else ``given`` itself."""
        if len(given) < SHORT_ID:
            return given
        matches = [i for i in self._directory.approvals_in(session_key) if i.startswith(given)]
        return matches[0] if len(matches) == 1 else given
