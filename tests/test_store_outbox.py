"""The outbox in the store: a reply stored the first time comes back as stored (without a
second read), and a later delivery of the same turn gets the first texts and sent marks."""

from __future__ import annotations

import pytest

from core.store.base import OutboxChunk, Store

TURN = "turn-1"


@pytest.fixture
def store(any_store: Store) -> Store:
    """Each test of this module runs on SQLite and on PostgreSQL."""
    return any_store


def chunks(*texts: str) -> list[OutboxChunk]:
    return [OutboxChunk(TURN, i, "telegram", "42", None, t, True) for i, t in enumerate(texts)]


async def test_a_new_reply_comes_back_as_a_read_would_return_it(store: Store) -> None:
    first = await store.put_outbox(chunks("one", "two \ud800 lone"))
    again = await store.put_outbox(chunks("one", "two \ud800 lone"))  # read from the file
    assert first == again
    assert [c.text for c in first] == ["one", "two \ufffd lone"]
    assert all(c.message_id is None for c in first)


async def test_a_second_delivery_gets_the_first_texts_and_marks(store: Store) -> None:
    await store.put_outbox(chunks("first answer", "second part"))
    await store.mark_outbox_sent(TURN, 0, "m-100")
    replayed = await store.put_outbox(chunks("a regenerated answer"))
    assert [(c.text, c.message_id) for c in replayed] == [
        ("first answer", "m-100"),
        ("second part", None),
    ]


async def test_a_chunk_started_and_never_marked_sent_reads_back_as_in_flight(
    store: Store,
) -> None:
    await store.put_outbox(chunks("sent", "in flight", "not begun"))
    await store.mark_outbox_started(TURN, 0)
    await store.mark_outbox_sent(TURN, 0, "m-1")
    await store.mark_outbox_started(TURN, 1)  # the process stops during this send
    replayed = await store.put_outbox(chunks("sent", "in flight", "not begun"))
    assert [(c.started_at is not None, c.in_flight) for c in replayed] == [
        (True, False),
        (True, True),
        (False, False),
    ]
    assert [c.key for c in replayed] == [f"{TURN}.0", f"{TURN}.1", f"{TURN}.2"]
