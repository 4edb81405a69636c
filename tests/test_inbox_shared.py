"""The shared durable inbox (adapters/inbox.py) with a platform of the test's own: notes
stored in the real SQLite store, handed to a sink that records them."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field

import pytest

from adapters.base import ChatRef, InboundEvent, Sender, SessionKey
from adapters.inbox import DurableInbox, ItemFormat
from core.store.base import InboundRecord
from core.store.sqlite import SqliteStore

PLATFORM = "notes"


@dataclass(frozen=True, slots=True)
class Note:
    id: str
    text: str


def _revive(record: InboundRecord) -> Note:
    data = json.loads(record.payload)
    return Note(str(data["id"]), str(data["text"]))


NOTES: ItemFormat[Note] = ItemFormat(
    PLATFORM, "note", lambda n: n.id, lambda n: json.dumps({"id": n.id, "text": n.text}), _revive
)


def event_of(note: Note) -> InboundEvent:
    chat = ChatRef(PLATFORM, "c1")
    key = SessionKey(PLATFORM, "dm", "c1")
    return InboundEvent(
        "text", PLATFORM, note.id, chat, "dm", Sender("u1", "Ann"), key, text=note.text
    )


@dataclass
class Platform:
    """The sink side: records each note handed over; ``hold`` keeps the hand-over running."""

    hold: bool = False
    settles: bool = True
    handed: list[str] = field(default_factory=list)
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    raises: bool = False
    hands_over: bool = False
    folds_into: str | None = None
    """The id of the item whose event this one's delivery returns (an album's part)."""

    async def handle(self, note: Note) -> InboundEvent:
        self.handed.append(note.text)
        self.entered.set()
        if self.raises:
            raise RuntimeError("the sink broke")
        if self.hold:
            await asyncio.Event().wait()  # until cancelled
        event = event_of(Note(self.folds_into, note.text) if self.folds_into else note)
        if self.hands_over:
            event.receipt.hand_over()
        event.receipt.settle(self.settles)
        return event

    def inbox(self, store: SqliteStore) -> DurableInbox[Note]:
        return DurableInbox(store, NOTES, self.handle)


async def state_of(store: SqliteStore, item_id: str) -> str | None:
    record = await store.get_inbound(PLATFORM, item_id)
    return record.state if record is not None else None


async def assert_next_run_replays(store: SqliteStore, item_id: str, text: str) -> None:
    """A new run's replay hands the item over once more and marks it done."""
    platform = Platform()
    restarted = platform.inbox(store)
    assert await restarted.replay() == 1
    await restarted.drain()
    assert platform.handed == [text]
    assert await state_of(store, item_id) == "done"


async def test_an_accepted_item_is_delivered_once_and_marked_done(store: SqliteStore) -> None:
    platform = Platform()
    inbox = platform.inbox(store)
    assert await inbox.accept(Note("n1", "hello"), "notes:dm:c1")
    await inbox.drain()
    assert platform.handed == ["hello"]
    assert await state_of(store, "n1") == "done"


async def test_a_duplicate_id_is_refused_and_not_delivered_again(store: SqliteStore) -> None:
    platform = Platform()
    inbox = platform.inbox(store)
    assert await inbox.accept(Note("n1", "hello"), "notes:dm:c1")
    assert not await inbox.accept(Note("n1", "hello again"), "notes:dm:c1")
    await inbox.drain()
    assert platform.handed == ["hello"]
    assert await inbox.replay() == 0


async def test_a_delivery_still_running_at_close_stays_unfinished_and_replays(
    store: SqliteStore,
) -> None:
    first = Platform(hold=True)
    inbox = first.inbox(store)
    await inbox.accept(Note("n1", "long"), "notes:dm:c1")
    await first.entered.wait()
    await inbox.close()
    assert await state_of(store, "n1") == "processing"
    await assert_next_run_replays(store, "n1", "long")


async def test_an_item_whose_turn_did_not_settle_stays_processing_and_replays(
    store: SqliteStore,
) -> None:
    first = Platform(settles=False)
    inbox = first.inbox(store)
    await inbox.accept(Note("n1", "cut short"), "notes:dm:c1")
    await inbox.drain()
    assert first.handed == ["cut short"]
    assert await state_of(store, "n1") == "processing"
    await assert_next_run_replays(store, "n1", "cut short")


async def test_an_unreadable_stored_payload_becomes_a_dead_letter_and_the_rest_replay(
    store: SqliteStore,
) -> None:
    await store.enqueue_inbound(InboundRecord(PLATFORM, "bad", "k", "{not json", time.time()))
    good = json.dumps({"id": "n2", "text": "fine"})
    await store.enqueue_inbound(InboundRecord(PLATFORM, "n2", "k", good, time.time()))
    platform = Platform()
    inbox = platform.inbox(store)
    assert await inbox.replay() == 2
    await inbox.drain()
    assert platform.handed == ["fine"]
    assert await state_of(store, "bad") == "failed"
    [letter] = await store.list_dead_letters(PLATFORM)
    assert (letter.item_id, letter.raw, letter.attempts) == ("bad", "{not json", 1)
    assert "JSONDecodeError" in letter.error


async def test_a_handle_that_raises_marks_the_item_failed_and_keeps_its_payload(
    store: SqliteStore,
) -> None:
    platform = Platform(raises=True)
    inbox = platform.inbox(store)
    await inbox.accept(Note("n1", "boom"), "notes:dm:c1")
    await inbox.drain()
    assert await state_of(store, "n1") == "failed"
    [letter] = await store.list_dead_letters(PLATFORM)
    assert json.loads(letter.raw) == {"id": "n1", "text": "boom"}
    assert "the sink broke" in letter.error


async def test_a_handed_over_item_is_neither_marked_nor_counted_as_cut_short(
    store: SqliteStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process handles it and marks it done (docs/cluster.md)."""
    platform = Platform(hands_over=True)
    inbox = platform.inbox(store)
    with caplog.at_level(logging.INFO, logger="adapters.inbox"):
        await inbox.accept(Note("n1", "theirs"), "notes:dm:c1")
        await inbox.drain()
    assert platform.handed == ["theirs"]
    assert await state_of(store, "n1") == "processing"
    assert "replays next run" not in caplog.text
    assert inbox.in_flight == frozenset()


async def test_redeliver_hands_over_unfinished_items_again_but_not_those_in_flight(
    store: SqliteStore,
) -> None:
    platform = Platform(hold=True)
    inbox = platform.inbox(store)
    await inbox.accept(Note("n1", "running here"), "notes:dm:c1")
    await platform.entered.wait()
    left = json.dumps({"id": "n2", "text": "left by another"})
    await store.enqueue_inbound(InboundRecord(PLATFORM, "n2", "notes:dm:c1", left, time.time()))
    assert inbox.in_flight == frozenset({"n1"})

    records = await store.unfinished_inbound(PLATFORM)
    assert sorted(r.update_id for r in records) == ["n1", "n2"]
    assert await inbox.redeliver(records) == 1
    await asyncio.sleep(0)
    assert platform.handed == ["running here", "left by another"]
    await inbox.close()
    assert inbox.in_flight == frozenset()


async def test_an_item_folded_into_another_items_handed_over_event_is_done_at_once(
    store: SqliteStore,
) -> None:
    """An album's later part: the first part's item stands for it at the other process."""
    platform = Platform(hands_over=True, folds_into="n1")
    inbox = platform.inbox(store)
    await inbox.accept(Note("n2", "second part"), "notes:dm:c1")
    await inbox.drain()
    assert await state_of(store, "n2") == "done"


async def test_replay_skips_an_item_another_process_finished_after_the_list_was_read(
    store: SqliteStore,
) -> None:
    """Several processes on one store: the list is read, then another process marks an
    item done; delivering it would make it processing (and run) again."""
    note = json.dumps({"id": "n1", "text": "theirs"})
    await store.enqueue_inbound(InboundRecord(PLATFORM, "n1", "notes:dm:c1", note, time.time()))
    listed = await store.unfinished_inbound(PLATFORM)
    await store.set_inbound_state(PLATFORM, "n1", "done")

    async def as_read_before(platform: str) -> list[InboundRecord]:
        return listed

    store.unfinished_inbound = as_read_before  # type: ignore[method-assign]
    platform = Platform()
    assert await platform.inbox(store).replay() == 0
    assert platform.handed == [] and await state_of(store, "n1") == "done"


async def test_a_redelivered_item_stored_but_never_started_is_delivered_once(
    store: SqliteStore,
) -> None:
    """An enqueue cut off by an outage (or by its receiver's cancellation) may commit after
    this run's replay read its list: the item is pending and nothing would hand it over.
    Its redelivery does, once; a second redelivery finds it started."""
    await store.enqueue_inbound(
        InboundRecord(PLATFORM, "n1", "notes:dm:c1", json.dumps({"id": "n1", "text": "late"}), 1.0)
    )
    platform = Platform()
    inbox = platform.inbox(store)
    assert await inbox.accept(Note("n1", "late"), "notes:dm:c1")
    assert not await inbox.accept(Note("n1", "late"), "notes:dm:c1")
    await inbox.drain()
    assert platform.handed == ["late"]
    assert await state_of(store, "n1") == "done"
    assert not await inbox.accept(Note("n1", "late"), "notes:dm:c1")
    assert platform.handed == ["late"]


async def test_a_redelivered_item_another_run_started_is_not_delivered_again(
    store: SqliteStore,
) -> None:
    first = Platform(settles=False)
    inbox = first.inbox(store)
    await inbox.accept(Note("n1", "once"), "notes:dm:c1")
    await inbox.drain()
    assert await state_of(store, "n1") == "processing"
    second = Platform()
    assert not await second.inbox(store).accept(Note("n1", "once"), "notes:dm:c1")
    assert second.handed == []
