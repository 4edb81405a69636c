"""No update lost, none handled twice: the inbox and our own getUpdates loop."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from adapters.base import ChatRef, InboundEvent
from adapters.calls import Send
from adapters.telegram.inbox import unreadable_id
from core.store.base import InboundRecord, StoreError
from core.store.sqlite import SqliteStore
from tests.platform_sim.base import SimError
from tests.platform_sim.telegram_sim import ALICE, CallbackQuery, TelegramSim
from tests.telegram.conftest import AdapterFactory
from tests.telegram.harness import EventLog


class GatedStore:
    """The real store, with ``enqueue_inbound`` held at a gate or failing on demand."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.gate.set()
        self.entered = asyncio.Event()
        self.failures = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def enqueue_inbound(self, record: InboundRecord) -> bool:
        self.entered.set()
        await self.gate.wait()
        if self.failures:
            self.failures -= 1
            raise StoreError("disk I/O error")
        return await self.inner.enqueue_inbound(record)


def update_of(sim: TelegramSim, update_id: str) -> Any:
    return next(u for u in sim.updates if u.update_id == int(update_id))


async def test_update_is_stored_before_telegram_sees_it_confirmed(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    gated = GatedStore(store)
    gated.gate.clear()
    await start_adapter(db=gated)
    said = await telegram_sim.user_says(ALICE.id, "keep me")
    await asyncio.wait_for(gated.entered.wait(), 5)
    assert not telegram_sim.is_confirmed(int(said.event_id or 0))
    assert await store.get_inbound("telegram", said.event_id or "") is None
    gated.gate.set()
    await telegram_sim.wait_for(lambda: telegram_sim.is_confirmed(int(said.event_id or 0)))
    assert await store.get_inbound("telegram", said.event_id or "") is not None
    assert (await events.next_event()).text == "keep me"


async def test_failed_store_write_leaves_update_unconfirmed_and_it_is_fetched_again(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    gated = GatedStore(store)
    gated.failures = 1
    adapter = await start_adapter(db=gated)
    said = await telegram_sim.user_says(ALICE.id, "survive the disk error")
    assert (await events.next_event()).text == "survive the disk error"
    await adapter.drain()
    assert update_of(telegram_sim, said.event_id or "").deliveries == 2
    assert [e.text for e in events.events] == ["survive the disk error"]


async def test_handled_update_is_marked_done(
    adapter: Any, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    events.gate = asyncio.Event()
    said = await telegram_sim.user_says(ALICE.id, "work")
    await events.next_event()
    record = await store.get_inbound("telegram", said.event_id or "")
    assert record is not None and record.state == "processing"
    assert record.session_key == "telegram:dm:42"
    events.gate.set()
    await adapter.drain()
    assert await store.unfinished_inbound("telegram") == []


async def test_redelivered_update_never_reaches_the_sink_twice(
    adapter: Any, telegram_sim: TelegramSim, events: EventLog
) -> None:
    said = await telegram_sim.user_says(ALICE.id, "once")
    await events.next_event()
    update = update_of(telegram_sim, said.event_id or "")
    await telegram_sim.wait_for(lambda: update.confirmed_at)
    update.confirmed_at = None  # Telegram lost our confirmation and sends it again
    await telegram_sim.changed()
    await telegram_sim.wait_for(lambda: update.deliveries == 2 and update.confirmed_at)
    await adapter.drain()
    assert [e.text for e in events.events] == ["once"]


async def test_restart_replays_an_unfinished_update_exactly_once(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    events.gate = asyncio.Event()  # the first run never finishes handling it
    first = await start_adapter()
    said = await telegram_sim.user_says(ALICE.id, "answer me after the restart")
    await events.next_event()
    await first.stop()
    update = update_of(telegram_sim, said.event_id or "")
    update.confirmed_at = None  # and Telegram redelivers it as well
    after_restart = EventLog()
    second = await start_adapter(sink=after_restart)
    replayed = await after_restart.next_event()
    await telegram_sim.wait_for(lambda: update.deliveries >= 2 and update.confirmed_at)
    await second.drain()
    assert (replayed.text, replayed.update_id) == ("answer me after the restart", said.event_id)
    assert len(after_restart.events) == 1
    assert await store.unfinished_inbound("telegram") == []


async def test_update_stays_unfinished_until_its_session_settles(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    turn_over: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    waited_for: list[str] = []

    async def sink(event: InboundEvent) -> None:  # its work goes on after it returns (a turn)
        event.receipt.follow(turn_over)
        waited_for.append(str(event.session_key))
        await events(event)

    adapter = await start_adapter(sink=sink)
    said = await telegram_sim.user_says(ALICE.id, "a long task")
    await events.next_event()
    assert [r.update_id for r in await store.unfinished_inbound("telegram")] == [said.event_id]
    turn_over.set_result(True)
    await adapter.drain()
    assert (waited_for, await store.unfinished_inbound("telegram")) == (["telegram:dm:42"], [])


async def test_update_whose_work_was_cut_short_stays_unfinished(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    async def shutdown_cut_it_short(event: InboundEvent) -> None:
        event.receipt.settle(False)
        await events(event)

    adapter = await start_adapter(sink=shutdown_cut_it_short)
    said = await telegram_sim.user_says(ALICE.id, "interrupted by a shutdown")
    await events.next_event()
    await adapter.drain()
    [record] = await store.unfinished_inbound("telegram")
    assert (record.update_id, record.state) == (said.event_id, "processing")


async def test_failing_event_handler_marks_update_failed_and_receiving_goes_on(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    async def sink(event: InboundEvent) -> None:
        await events(event)
        if event.text == "boom":
            raise RuntimeError("handler bug")

    adapter = await start_adapter(sink=sink)
    boom = await telegram_sim.user_says(ALICE.id, "boom")
    await telegram_sim.user_says(ALICE.id, "still here")
    await events.next_event(2)
    await adapter.drain()
    record = await store.get_inbound("telegram", boom.event_id or "")
    assert record is not None and record.state == "failed"
    assert [e.text for e in events.events] == ["boom", "still here"]


async def test_polling_survives_server_errors(
    adapter: Any, telegram_sim: TelegramSim, events: EventLog
) -> None:
    telegram_sim.fail_next("getUpdates", SimError.server_error(502), times=2)
    await telegram_sim.user_says(ALICE.id, "through the outage")
    assert (await events.next_event()).text == "through the outage"


async def test_polling_survives_a_dropped_connection(
    adapter: Any, telegram_sim: TelegramSim, events: EventLog
) -> None:
    await telegram_sim.wait_for(lambda: telegram_sim.in_flight_polls())
    assert await telegram_sim.drop_connection() >= 1
    await telegram_sim.user_says(ALICE.id, "after the drop")
    assert (await events.next_event()).text == "after the drop"


async def test_polling_waits_retry_after_when_get_updates_is_rate_limited(
    adapter: Any, telegram_sim: TelegramSim, events: EventLog
) -> None:
    await telegram_sim.wait_for(lambda: telegram_sim.in_flight_polls())
    telegram_sim.fail_next("getUpdates", SimError.rate_limit(0.3))
    await telegram_sim.user_says(ALICE.id, "ends the open poll; the next one is a 429")
    await events.next_event()
    await telegram_sim.user_says(ALICE.id, "slowly")
    assert (await events.next_event(2)).text == "slowly"
    polls = telegram_sim.calls_to("getUpdates")
    limited = next(i for i, c in enumerate(polls) if c.status == 429)
    assert polls[limited + 1].at - polls[limited].at >= 0.3


async def test_unreadable_stored_update_is_marked_failed_and_the_rest_replay(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    await store.enqueue_inbound(
        InboundRecord("telegram", "7", "telegram:dm:42", '{"update_id": "no message"', 1.0)
    )
    telegram_sim.chat(ALICE.id)
    good = {"update_id": 8, "message": {"message_id": 1, "date": 1700000000, "text": "kept",
            "chat": {"id": 42, "type": "private"}, "from": ALICE.to_json()}}  # fmt: skip
    await store.enqueue_inbound(
        InboundRecord("telegram", "8", "telegram:dm:42", json.dumps(good), 2.0)
    )
    adapter = await start_adapter()
    assert (await events.next_event()).text == "kept"
    await adapter.drain()
    broken = await store.get_inbound("telegram", "7")
    assert broken is not None and broken.state == "failed"
    assert await store.unfinished_inbound("telegram") == []


async def test_update_ptb_cannot_read_is_a_dead_letter_and_does_not_block_the_next(
    adapter: Any, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    broken = await telegram_sim.push_update("message", {"message_id": 5, "text": "no chat"})
    said = await telegram_sim.user_says(ALICE.id, "after the broken one")
    assert (await events.next_event()).text == "after the broken one"
    await adapter.drain()
    [letter] = await store.list_dead_letters("telegram")
    assert letter.item_id == str(broken.update_id) and "no chat" in letter.raw
    await telegram_sim.wait_for(lambda: telegram_sim.is_confirmed(broken.update_id))
    assert [e.update_id for e in events.events] == [said.event_id]


async def test_press_without_payload_is_still_answered(
    adapter: Any, telegram_sim: TelegramSim, events: EventLog
) -> None:
    telegram_sim.chat(ALICE.id)
    card = await adapter.perform(Send(ChatRef("telegram", str(ALICE.id)), "a game card"))
    message = telegram_sim.find_message(ALICE.id, int(card.message_id))
    query = CallbackQuery("q-game", message, "", ALICE, time.monotonic())  # type: ignore[arg-type]
    telegram_sim.queries[query.id] = query
    await telegram_sim.push_update("callback_query", {
        "id": query.id, "from": ALICE.to_json(), "message": message.raw,  # type: ignore[union-attr]
        "chat_instance": "ci42", "game_short_name": "snake",
    })  # fmt: skip
    await telegram_sim.wait_for(lambda: query.id in telegram_sim.answers)
    await adapter.drain()
    assert events.events == []


class StateFailingStore:
    """The real store; setting an update ``processing`` fails once (after it was stored)."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner
        self.failed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def set_inbound_state(self, platform: str, update_id: str, state: Any) -> None:
        if state == "processing" and not self.failed:
            self.failed = True
            raise StoreError("database is locked")
        await self.inner.set_inbound_state(platform, update_id, state)


async def test_a_failed_processing_mark_still_delivers_the_update_once(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    flaky = StateFailingStore(store)
    adapter = await start_adapter(db=flaky)
    said = await telegram_sim.user_says(ALICE.id, "deliver me anyway")
    after = await telegram_sim.user_says(ALICE.id, "and me")
    await events.next_event(2)
    await adapter.drain()
    assert flaky.failed
    assert [e.update_id for e in events.events] == [said.event_id, after.event_id]
    assert await store.unfinished_inbound("telegram") == []


async def test_a_raw_update_without_a_readable_id_is_kept_as_a_dead_letter(
    adapter: Any, store: SqliteStore
) -> None:
    items = [{"update_id": "not a number", "x": 1}, {"message": {"text": "no id"}}]
    for item in items:
        assert await adapter._inbox.accept_raw(item) is None
    letters = await store.list_dead_letters("telegram")
    assert [(d.item_id, json.loads(d.raw)) for d in letters] == [
        (unreadable_id(item), item) for item in items
    ]


async def test_a_polled_update_is_stored_as_telegram_sent_it(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    """The stored payload is the update's JSON as it came (its keys in Telegram's order, a
    field PTB does not know kept), not PTB's objects serialised again (issue 29 point 4)."""
    await start_adapter()
    telegram_sim.chat(ALICE.id)
    message = {
        "text": "as sent", "date": 1_700_000_000, "message_id": 7, "future_field": {"a": 1},
        "chat": {"type": "private", "id": ALICE.id, "first_name": "Alice"},
        "from": {"first_name": "Alice", "is_bot": False, "id": ALICE.id},
    }  # fmt: skip
    pushed = await telegram_sim.push_raw({"message": message})
    assert (await events.next_event()).text == "as sent"
    record = await store.get_inbound("telegram", str(pushed.update_id))
    assert record is not None
    assert record.payload == json.dumps({"update_id": pushed.update_id, "message": message})
