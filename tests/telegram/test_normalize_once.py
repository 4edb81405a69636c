"""Each Telegram update is normalized once on its way in: the event made on arrival (whose
session key is stored with the update) is the one handed to the gateway; a replayed update
is normalized once when it is read back."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from datetime import UTC, datetime

from telegram import Bot, Chat, Message, Update, User

from adapters.base import InboundEvent
from adapters.telegram.inbox import Inbox
from adapters.telegram.normalize import BotIdentity, Normalizer
from core.store.base import InboundRecord
from core.store.sqlite import SqliteStore

WAIT = 5.0
ALICE = User(42, "Alice", is_bot=False)


class CountedNormalizer(Normalizer):
    """The real normalizer, counting the updates it normalizes (by update id)."""

    def __init__(self) -> None:
        super().__init__(BotIdentity(1, "test_bot"))
        self.calls: Counter[int] = Counter()

    def event(self, update: Update, raw: str | None = None) -> InboundEvent | None:
        self.calls[update.update_id] += 1
        return super().event(update, raw)


class Sink:
    def __init__(self) -> None:
        self.events: list[InboundEvent] = []
        self.arrived = asyncio.Event()

    async def __call__(self, event: InboundEvent) -> None:
        self.events.append(event)
        self.arrived.set()


def hello(update_id: int) -> Update:
    message = Message(1, datetime.now(UTC), Chat(42, Chat.PRIVATE), from_user=ALICE, text="hi")
    return Update(update_id, message=message)


async def test_an_arriving_update_is_normalized_once(store: SqliteStore) -> None:
    normalizer, sink = CountedNormalizer(), Sink()
    inbox = Inbox(store, Bot("1:token"), normalizer, sink)
    try:
        assert await inbox.accept(hello(7))
        await asyncio.wait_for(sink.arrived.wait(), WAIT)
    finally:
        await inbox.close()
    assert normalizer.calls == {7: 1}
    [event] = sink.events
    stored = await store.get_inbound("telegram", "7")
    assert stored is not None and stored.session_key == str(event.session_key)
    assert event.text == "hi"


async def test_a_replayed_update_is_normalized_once(store: SqliteStore) -> None:
    payload = json.dumps(hello(8).to_dict(), default=str)
    record = InboundRecord("telegram", "8", "telegram:dm:42", payload, time.time())
    assert await store.enqueue_inbound(record)
    normalizer, sink = CountedNormalizer(), Sink()
    inbox = Inbox(store, Bot("1:token"), normalizer, sink)
    try:
        assert await inbox.replay() == 1
        await asyncio.wait_for(sink.arrived.wait(), WAIT)
    finally:
        await inbox.close()
    assert normalizer.calls == {8: 1}
    assert [event.text for event in sink.events] == ["hi"]
