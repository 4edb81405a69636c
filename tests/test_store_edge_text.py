"""Text repaired once at the edges and trusted inside (core/text.py): a value built from a
platform event that carried a lone surrogate was repaired by the adapter's normalize step,
and the store — which binds text as given — keeps it and gives it back, on SQLite and on
PostgreSQL."""

from __future__ import annotations

import pytest

from adapters.discord.normalize import Envelope, event_of
from adapters.session_keys import KeyStrategy, key_rule
from core.store.base import OutboxChunk, Store
from core.types import ChatMessage

LONE, FFFD = "\ud800", "\ufffd"


@pytest.fixture
def store(any_store: Store) -> Store:
    """Each test of this module runs on SQLite and on PostgreSQL."""
    return any_store


async def test_an_event_repaired_at_normalize_is_stored_and_read_back(store: Store) -> None:
    envelope = Envelope(
        "message", "1001", f"chan{LONE}", "dm", f"user{LONE}", f"Ann{LONE}", text=f"hi {LONE}!"
    )
    event = event_of(envelope, key_rule(KeyStrategy()))
    key, text = str(event.session_key), event.text
    assert LONE not in key and (FFFD in key and text == f"hi {FFFD}!")

    session = await store.create_session(key, "default")
    await store.append_message(session.id, None, ChatMessage("user", text), origin=key)
    chunk = OutboxChunk("turn-1", 0, event.platform, event.chat.chat_id, None, text, False)
    [stored_chunk] = await store.put_outbox([chunk])

    found = await store.get_active_session(key)
    assert found is not None and found.id == session.id and found.key == key
    [stored] = await store.load_active_messages(session.id)
    assert (stored.message.content, stored.origin) == (text, key)
    assert (stored_chunk.chat_id, stored_chunk.text) == (f"chan{FFFD}", text)
