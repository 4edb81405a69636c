"""The memory tables (SQLite migration 12 with FTS5, PostgreSQL 5 with tsvector + GIN):
core/store/memory.py and core/store/pg_memory.py. Each test runs on SQLite and on
PostgreSQL."""

from __future__ import annotations

import pytest

from core.store.base import Store
from core.store.memory import MemoryStore, memory_store

ALICE = "person:telegram:1"
BOB = "person:telegram:2"
GROUP = "chat:telegram:group:-100"


class Ticks:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture
def memory(any_store: Store) -> MemoryStore:
    return memory_store(any_store, Ticks())


async def test_an_entry_is_stored_once_and_found_by_any_of_its_words(memory: MemoryStore) -> None:
    saved = await memory.add_memory(ALICE, "Alice's cat is called Mochi")
    assert saved is not None and saved.scope == "person"
    assert await memory.add_memory(ALICE, "alice's  CAT is called mochi") is None
    assert await memory.duplicate_of([ALICE], "Alice's cat is called Mochi") == saved
    assert await memory.count_memory(ALICE) == 1
    found = await memory.search_memory([ALICE], "what is the cat's name?", 10)
    assert [e.id for e in found] == [saved.id]
    assert found[0].text == "Alice's cat is called Mochi"


async def test_search_and_listing_see_only_the_owners_asked_for(memory: MemoryStore) -> None:
    await memory.add_memory(ALICE, "secret plan: surprise party")
    await memory.add_memory(GROUP, "the group meets on Fridays")
    assert await memory.search_memory([GROUP], "secret party Fridays", 10) != []
    seen = await memory.search_memory([GROUP], "secret party Fridays", 10)
    assert {e.owner for e in seen} == {GROUP}
    assert await memory.search_memory([BOB], "secret party", 10) == []
    assert await memory.search_memory([], "secret", 10) == []
    listed = await memory.memories_of([BOB, GROUP], 10)
    assert [e.text for e in listed] == ["the group meets on Fridays"]


async def test_search_syntax_in_a_query_is_only_words(memory: MemoryStore) -> None:
    await memory.add_memory(ALICE, "NEAR the OR gate")
    found = await memory.search_memory([ALICE], 'gate" OR * NEAR( -x:', 10)
    assert [e.text for e in found] == ["NEAR the OR gate"]
    assert await memory.search_memory([ALICE], "*** ---", 10) == []


async def test_recent_and_used_entries_come_first(memory: MemoryStore) -> None:
    old = await memory.add_memory(ALICE, "likes tea")
    await memory.add_memory(ALICE, "lives in Lyon")
    newest = await memory.add_memory(ALICE, "works nights")
    assert old is not None and newest is not None
    assert (await memory.memories_of([ALICE], 10))[0].text == "works nights"
    await memory.search_memory([ALICE], "tea", 10)  # a use brings it forward
    listed = await memory.memories_of([ALICE], 2)
    assert [e.text for e in listed] == ["likes tea", "works nights"]
    assert listed[0].uses == 1


async def test_forgetting_takes_only_the_askers_entries(memory: MemoryStore) -> None:
    mine = await memory.add_memory(ALICE, "one")
    theirs = await memory.add_memory(BOB, "two")
    await memory.add_memory(ALICE, "three")
    assert mine is not None and theirs is not None
    assert not await memory.forget_memory([ALICE], theirs.id)
    assert await memory.forget_memory([ALICE], mine.id)
    assert not await memory.forget_memory([ALICE], mine.id)
    assert await memory.search_memory([ALICE], "one", 10) == []
    assert await memory.forget_all_memory([ALICE]) == 1
    assert await memory.memory_counts() == {"person": 1, "chat": 0, "profile": 0}


async def test_settings_are_kept_per_identity_and_chat(memory: MemoryStore) -> None:
    await memory.set_memory_setting("telegram:1", "off", "", on=True)
    await memory.set_memory_setting("telegram:1", "share", GROUP, on=True)
    await memory.set_memory_setting("telegram:1", "share", GROUP, on=True)
    await memory.set_memory_setting("telegram:2", "share", "chat:other", on=True)
    rows = await memory.memory_settings(["telegram:1"])
    assert sorted(rows) == [("telegram:1", "off", ""), ("telegram:1", "share", GROUP)]
    assert await memory.sharers_in(GROUP) == ["telegram:1"]
    await memory.set_memory_setting("telegram:1", "share", GROUP, on=False)
    assert await memory.sharers_in(GROUP) == []
