"""Discord's durable inbox: a message or interaction is stored first, then handled, once.

Every MESSAGE_CREATE and INTERACTION_CREATE becomes an :class:`Envelope` stored in the
store's inbound queue under ``(platform "discord", <snowflake>)`` before its turn starts.
The snowflake is unique per message and per interaction, so an event Discord replays
after a RESUME (or a reconnect) finds its id known and starts nothing: one message, one
turn, one reply. Storing goes through the shared :class:`adapters.inbox.Intake` (poison
items become dead letters; a store outage is told to the chat once).

States (as for the other inboxes)::

    received --enqueue_inbound--> pending --deliver--> processing
    processing --handled, its turn's reply delivered (settled True)--> done
               --cut short by shutdown (settled False) or cancelled--> processing
                                                                       (replays next run)
               --handling raised------------------------------------> failed (+ dead letter)

On start, :meth:`DiscordInbox.replay` hands over what a previous run left unfinished.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from adapters.base import ChatRef, InboundEvent
from adapters.discord.normalize import PLATFORM, Envelope
from adapters.inbox import Intake, preview
from core.store.base import InboundRecord, InboundState, Store, StoreUnavailable
from core.tasks import TaskSet

_log = logging.getLogger(__name__)

Handle = Callable[[Envelope], Awaitable[InboundEvent | None]]
"""Hand one envelope to the gateway; returns the event delivered (None: nothing for us)."""
SettleWait = Callable[[str, str], Awaitable[bool]]


class DiscordInbox:
    def __init__(
        self,
        store: Store,
        intake: Intake,
        handle: Handle,
        *,
        settled: SettleWait | None = None,
    ) -> None:
        self.store, self.intake, self.handle, self.settled = store, intake, handle, settled
        self._deliveries = TaskSet(_log)

    async def accept(self, envelope: Envelope, session_key: str, chat: ChatRef | None) -> bool:
        """Store ``envelope`` and start handling it; False when its id is already known
        (a replay after RESUME) or it was quarantined."""
        raw = envelope.to_json()
        record = InboundRecord(PLATFORM, envelope.id, session_key, raw, time.time())
        taken = await self.intake.take(
            envelope.id, raw, lambda: self.store.enqueue_inbound(record), chat
        )
        if taken == "known":
            _log.info("discord item %s already received; not handled again", envelope.id)
        if taken != "stored":
            return False
        await self._deliver(envelope)
        return True

    async def replay(self) -> int:
        """Hand over what a previous run left unfinished; returns how many."""
        records = await self.store.unfinished_inbound(PLATFORM)
        for record in records:
            try:
                envelope = Envelope.from_json(record.payload)
            except (ValueError, TypeError) as exc:
                await self.store.set_inbound_state(PLATFORM, record.update_id, "failed")
                await self.intake.reject(record.update_id, record.payload, exc)
                continue
            await self._deliver(envelope)
        if records:
            _log.info("discord: replaying %d unfinished item(s)", len(records))
        return len(records)

    async def close(self) -> None:
        """Cancel deliveries in flight; their items stay unfinished for the next run."""
        await self._deliveries.aclose()

    async def drain(self) -> None:
        await self._deliveries.drain()

    async def _deliver(self, envelope: Envelope) -> None:
        try:
            await self.store.set_inbound_state(PLATFORM, envelope.id, "processing")
        except Exception:
            _log.exception("discord item %s: could not mark it processing", envelope.id)
        self._deliveries.spawn(self._hand_over(envelope), name=f"discord-item-{envelope.id}")

    async def _hand_over(self, envelope: Envelope) -> None:
        state: InboundState = "done"
        try:
            event = await self.handle(envelope)
            if event is not None and not await self._settle(event):
                _log.info("discord item %s: cut short; replays next run", envelope.id)
                return
        except Exception as exc:
            _log.exception("discord item %s: handling failed", envelope.id)
            state = "failed"
            await self._bury(envelope, exc)
        try:
            await self.store.set_inbound_state(PLATFORM, envelope.id, state)
        except StoreUnavailable as exc:
            _log.warning("discord item %s: not marked %s (%s)", envelope.id, state, preview(exc))

    async def _bury(self, envelope: Envelope, error: Exception) -> None:
        try:
            await self.intake.reject(envelope.id, envelope.to_json(), error)
        except Exception:
            _log.exception("discord item %s: could not keep it as a dead letter", envelope.id)

    async def _settle(self, event: InboundEvent) -> bool:
        if event.kind == "button" or self.settled is None:
            return True
        return await self.settled(str(event.session_key), event.update_id)


def notice_chat(event: InboundEvent | None) -> ChatRef | None:
    """Where to tell that the store is out: a chat that addressed the bot (a DM, a
    command, a press, a mention or a reply to it), never for a bot's message."""
    if event is None or event.sender.is_bot:
        return None
    addressed = event.chat_type == "dm" or event.kind != "text"
    return event.chat if addressed or event.mentioned or event.reply_to_bot else None
