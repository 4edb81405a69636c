"""Status reactions: the user's message shows how its turn is going (``[progress]
reactions = true``; docs/architecture.md, "Status reactions").

👀 when the turn starts, ✅ when it ends completed, ❌ when it ends otherwise (failed, or
stopped). Each is one :class:`~adapters.calls.React` call through the bot's pipeline: at
``CLEANUP`` priority, queued without waiting (the scheduler's ``later``) and charged to no
chat's message budget (no platform counts a reaction as a message), so a reaction never
delays a reply nor waits behind one, and a refused one (an emoji the platform lacks, one
already there) is logged, never fatal.

A turn's message is found by its origins (``UserMessage.origins``: a merged turn marks
every message it holds): the inbound stage ``reactions`` notes each text or command event's
own message id under its origin (:meth:`Reactions.noted`), a bounded memory that a replayed
update fills again.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from adapters.base import InboundEvent, SentMessage
from adapters.calls import DONE, FAILED, WORKING, React
from core.agent.turn import TurnResult, UserMessage
from gateway.inbound.stages import Next
from gateway.outbound.directory import ChatDirectory, origin_of

logger = logging.getLogger(__name__)

REMEMBERED = 10_000
"""Messages remembered for their reactions; the oldest are forgotten first."""


class Reactions:
    """Marks each turn's user message(s) when the turn starts and when it ends."""

    def __init__(self, directory: ChatDirectory, enabled: bool, capacity: int = REMEMBERED) -> None:
        self.enabled, self._directory = enabled, directory
        self._capacity = capacity
        self._messages: OrderedDict[str, SentMessage] = OrderedDict()

    def note(self, event: InboundEvent, origin: str) -> None:
        """Remember ``event``'s own message under ``origin`` (a text or command event)."""
        if not self.enabled or event.source is None:
            return
        self._messages[origin] = event.source
        self._messages.move_to_end(origin)
        while len(self._messages) > self._capacity:
            self._messages.popitem(last=False)

    async def noted(self, event: InboundEvent, next: Next) -> None:
        """Stage ``reactions`` (only with ``[progress] reactions``): a text or command
        event's own message is remembered under its origin before it is dispatched."""
        if event.kind in ("text", "command"):
            self.note(event, origin_of(event))
        await next(event)

    async def started(self, message: UserMessage) -> None:
        """The turn of ``message`` started: 👀 on each message it holds."""
        await self._react(message, WORKING)

    async def ended(self, message: UserMessage, result: TurnResult) -> None:
        """Its turn ended: ✅ (completed) or ❌; the messages are forgotten."""
        await self._react(message, DONE if result.status == "completed" else FAILED)
        for origin in message.origins:
            self._messages.pop(origin, None)

    async def _react(self, message: UserMessage, emoji: str) -> None:
        if not self.enabled:
            return
        for origin in message.origins:
            target = self._messages.get(origin)
            outbound = None if target is None else self._directory.outbound(target.chat.platform)
            if target is None or outbound is None:
                continue
            try:  # the bot of the message's own platform (a linked session spans several)
                await outbound.perform(React(target, emoji))
            except Exception as exc:  # queued without waiting; only a closing pipeline raises
                logger.info("reaction %s on %s not sent: %s", emoji, origin, exc)
