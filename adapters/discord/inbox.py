"""Discord's items in the shared durable inbox (:class:`adapters.inbox.DurableInbox`, whose
docstring draws the states): a message or interaction is stored first, then handled, once.

Every MESSAGE_CREATE and INTERACTION_CREATE becomes an :class:`Envelope` stored in the
store's inbound queue under ``(platform "discord", <snowflake>)`` before its turn starts.
The snowflake is unique per message and per interaction, so an event Discord replays
after a RESUME (or a reconnect) finds its id known and starts nothing: one message, one
turn, one reply. The adapter's handle opens a thread when the envelope asks for one and
answers a deferred slash command, around the sink.
"""

from __future__ import annotations

from operator import attrgetter

from adapters.discord.normalize import PLATFORM, Envelope
from adapters.inbox import ItemFormat
from core.store.base import InboundRecord


def _revive(record: InboundRecord) -> Envelope:
    return Envelope.from_json(record.payload)


ENVELOPES: ItemFormat[Envelope] = ItemFormat(
    PLATFORM, "item", attrgetter("id"), Envelope.to_json, _revive
)
