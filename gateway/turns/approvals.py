"""Approval cards: the chat face of :class:`core.approvals.Approvals`.

:class:`ChatApprover` implements :class:`core.approver.Approver`. ``present`` sends a card
to the session's chat (found through the :class:`ChatDirectory`) with the tool, a redacted
preview of its arguments, who asked and the id's short form, and buttons whose payload
carries the approval id (``ap:<id>:a|d|s``, ``ch:<id>:<n>``) — never the session, so a
stale card can only answer its own request. When a payload would not fit the platform's
``button_payload_limit`` the card is sent without buttons and names the ``/approve`` and
``/deny`` commands instead. ``settle`` edits the card to the outcome and who decided, and
removes the buttons.

``present`` raises when the card cannot be shown (no known chat, platform refused): the
registry then denies the request, since nobody saw it. Once shown, the card's location is
stored (``Store.set_approval_card``) so that a later run, which finds the approval left
pending by a crash or a restart, can :meth:`ChatApprover.retire` the card: edited to
``RESTART_NOTICE``, its buttons removed.

Cards and their edits go out at ``URGENT`` priority through the bot's outbound scheduler,
which waits out rate limits (the one retry layer, :mod:`gateway.outbound.rate_limits`); past its
bounds one error line names the chat and the error goes to the caller.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TypeVar

from adapters.base import Button, ButtonRows, Capabilities, ChatRef, NotModified, SentMessage
from adapters.calls import Edit, Priority, Send
from adapters.session_keys import parse_session_key
from core.approver import ApprovalRequest, Decision
from core.store.base import ApprovalRecord, Store
from gateway.control.commands import short_id
from gateway.control.syntax import approval_payload, choice_payload
from gateway.outbound.directory import ChatDirectory, Place
from gateway.outbound.pipeline import Outbound
from gateway.outbound.rate_limits import MAX_ATTEMPTS, Sleep, with_rate_limits
from gateway.turns.previews import preview, redact, shorten

logger = logging.getLogger(__name__)

T = TypeVar("T")
ARGUMENT_PREVIEW = 300
CHOICE_LABEL = 60
CANCELLED = "⏹ Cancelled"
RESTART_NOTICE = f"{CANCELLED} — the gateway restarted before this was answered; it did not run"
WITHDRAW_SECONDS = 5.0
"""How long a card cancelled in flight is waited for, to remove its buttons."""


class UnknownChat(LookupError):
    """No chat is known for the request's session key (nothing to present on)."""


class ChatApprover:
    def __init__(
        self, directory: ChatDirectory, *, sleep: Sleep = asyncio.sleep, store: Store | None = None
    ) -> None:
        self._directory = directory
        self._sleep = sleep
        self._store = store
        self._cards: dict[str, tuple[Outbound, SentMessage]] = {}

    def _with_rate_limits(self, call: Callable[[], Awaitable[T]], chat: ChatRef) -> Awaitable[T]:
        return with_rate_limits(
            call, attempts=MAX_ATTEMPTS, sleep=self._sleep, chat=chat, what="approval card"
        )

    async def present(self, request: ApprovalRequest) -> None:
        place = self._directory.place(request.session_key)
        if place is None:
            raise UnknownChat(f"no chat known for session {request.session_key}")
        buttons = card_buttons(request, place.outbound.capabilities)
        text = self._card_text(request, with_commands=not buttons)
        card = Send(place.chat, text, buttons, markup=False, priority=Priority.URGENT)
        send = partial(place.outbound.perform, card)
        message = await self._send_card(request, place, send)
        self._cards[request.id] = (place.outbound, message)
        self._directory.remember_approval(request.session_key, request.id)
        await self._store_card(request.id, message)

    async def _send_card(
        self, request: ApprovalRequest, place: Place, send: Callable[[], Awaitable[SentMessage]]
    ) -> SentMessage:
        """Send the card. Cancelled meanwhile (``/stop``), the send is not abandoned
        half-way: once the card arrives its buttons are removed (:meth:`_withdraw`)."""
        sending = asyncio.ensure_future(self._with_rate_limits(send, place.chat))
        try:
            return await asyncio.shield(sending)
        except asyncio.CancelledError:
            await self._withdraw(request, place.outbound, sending)
            raise

    async def _withdraw(
        self, request: ApprovalRequest, outbound: Outbound, sending: asyncio.Future[SentMessage]
    ) -> None:
        """The card of a request cancelled while it was being sent: wait (time-boxed) for it
        to arrive, then edit it to cancelled, without buttons — never left live."""
        done, _ = await asyncio.wait({sending}, timeout=WITHDRAW_SECONDS)
        if not done:
            sending.cancel()
            return
        if sending.cancelled() or sending.exception() is not None:
            return
        message = sending.result()
        text = self._card_text(request, with_commands=False) + f"\n\n{CANCELLED}"
        edit = partial(outbound.perform, _card_edit(message, text))
        try:
            await self._with_rate_limits(edit, message.chat)
        except Exception:
            logger.warning("approval %s: cancelled card not withdrawn", request.id, exc_info=True)

    async def _store_card(self, approval_id: str, message: SentMessage) -> None:
        """Remember the card's location for a later run; the card works without it."""
        if self._store is None:
            return
        chat = message.chat
        try:
            await self._store.set_approval_card(
                approval_id, chat.platform, chat.chat_id, chat.thread_id, message.message_id
            )
        except Exception:
            logger.warning("approval %s: card location not stored", approval_id, exc_info=True)

    async def retire(self, record: ApprovalRecord) -> bool:
        """Edit the card of an approval an earlier run left pending to ``RESTART_NOTICE``,
        without buttons. False (logged, never raised) when that could not be done."""
        card = record.card
        outbound = None if card is None else self._directory.outbound(card.platform)
        if card is None or outbound is None:
            logger.info("approval %s: no card to retire on a running adapter", record.id)
            return False
        message = SentMessage(ChatRef(card.platform, card.chat_id, card.thread_id), card.message_id)
        text = f"{record.tool} · id {short_id(record.id)}\n\n{RESTART_NOTICE}"
        edit = partial(outbound.perform, _card_edit(message, text))
        try:
            await self._with_rate_limits(edit, message.chat)
        except NotModified:
            pass
        except Exception:
            logger.warning("approval %s: stale card not retired", record.id, exc_info=True)
            return False
        return True

    async def settle(self, request: ApprovalRequest, decision: Decision) -> None:
        card = self._cards.pop(request.id, None)
        if card is None:
            return
        outbound, message = card
        text = (
            self._card_text(request, with_commands=False)
            + "\n\n"
            + self._outcome(request, decision)
        )
        edit = partial(outbound.perform, _card_edit(message, text))
        try:
            await self._with_rate_limits(edit, message.chat)
        except NotModified:
            pass
        except Exception:
            logger.warning("approval card %s could not be updated", request.id, exc_info=True)

    def _card_text(self, request: ApprovalRequest, *, with_commands: bool) -> str:
        who = self._name(request, request.requested_by)
        if request.kind == "choice":
            lines = [f"❓ {shorten(redact(request.prompt), 500)}"]
        else:
            lines = [f"⚠️ Approval needed: {request.tool}"]
            details = preview(request.arguments, ARGUMENT_PREVIEW)
            lines += [details] if details else []
            if request.prompt:
                lines.append(f"Why: {shorten(redact(request.prompt), ARGUMENT_PREVIEW)}")
        lines.append(f"Asked by {who} · id {short_id(request.id)}")
        if with_commands:
            lines.append(f"Reply /approve {short_id(request.id)} or /deny {short_id(request.id)}")
        return "\n".join(lines)

    def _outcome(self, request: ApprovalRequest, decision: Decision) -> str:
        who = self._name(request, decision.by)
        if decision.outcome == "approved" and request.kind == "choice":
            return f"✅ {who} chose: {redact(decision.choice or '')}"
        if decision.outcome == "approved":
            return f"✅ Approved by {who}" + (" (always, this session)" if decision.always else "")
        if decision.outcome == "denied":
            reason = f": {decision.note}" if decision.note else ""
            return f"❌ Denied by {who}{reason}" if decision.by else f"❌ Denied{reason}"
        if decision.outcome == "timed_out":
            return "⌛ Expired — no action taken"
        return CANCELLED

    def _name(self, request: ApprovalRequest, user_id: str | None) -> str:
        platform = parse_session_key(request.session_key).platform
        return self._directory.name_of(platform, user_id)


def _card_edit(message: SentMessage, text: str) -> Edit:
    """A card edited (to its outcome, or cancelled): plain text, no buttons, ``URGENT``."""
    return Edit(message, text, markup=False, priority=Priority.URGENT)


def card_buttons(request: ApprovalRequest, capabilities: Capabilities) -> ButtonRows:
    """The card's buttons, or none when a payload would not fit the platform's limit."""
    if request.kind == "choice":
        rows = [
            [
                Button(
                    shorten(redact(choice), CHOICE_LABEL),
                    choice_payload(request.id, index),
                    role="choice",
                )
            ]
            for index, choice in enumerate(request.choices)
        ]
    else:
        rows = [
            [
                Button("✅ Approve", approval_payload(request.id, "a"), role="approve"),
                Button("❌ Deny", approval_payload(request.id, "d"), role="deny"),
            ],
            [Button("✅ Always (this session)", approval_payload(request.id, "s"), role="always")],
        ]
    limit = capabilities.button_payload_limit
    if any(len(b.data.encode()) > limit for row in rows for b in row):
        logger.warning("approval %s: payload over %d bytes; no buttons", request.id, limit)
        return []
    return rows
