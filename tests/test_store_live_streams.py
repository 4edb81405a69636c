"""The ``live_streams`` table (SQLite migration 10, PostgreSQL 3): the message a session's
streamed answer is written into, kept until the stream ends (core/store/live_streams.py).
Each test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest

from core.store.base import Store, StreamRecord

KEY = "discord:dm:42"


@pytest.fixture
def store(any_store: Store) -> Store:
    return any_store


def record(message_id: str, thread_id: str | None = None) -> StreamRecord:
    return StreamRecord(KEY, "discord", "100", thread_id, message_id)


async def test_a_stream_is_kept_replaced_and_forgotten_per_session(store: Store) -> None:
    assert await store.stream_of(KEY) is None
    await store.put_stream(record("m1"))
    assert await store.stream_of(KEY) == record("m1")
    await store.put_stream(record("m2", thread_id="t9"))  # a new stream of the session
    assert await store.stream_of(KEY) == record("m2", thread_id="t9")
    assert await store.stream_of("discord:dm:43") is None


async def test_forgetting_an_older_message_leaves_the_newer_record(store: Store) -> None:
    await store.put_stream(record("m2"))
    await store.drop_stream(KEY, "m1")
    assert await store.stream_of(KEY) == record("m2")
    await store.drop_stream(KEY, "m2")
    assert await store.stream_of(KEY) is None
