"""Session keys are typed values; the stored string parses back to the same key."""

from __future__ import annotations

import pytest

from adapters.base import SessionKey
from adapters.session_keys import KeyStrategy, parse_session_key, session_key
from core.store.sqlite import SqliteStore

KEYS = [
    SessionKey("telegram", "dm", "42"),
    SessionKey("telegram", "group", "-100", user_id="7"),
    SessionKey("telegram", "group", "-100"),
    SessionKey("telegram", "thread", "-100", thread_id="12"),
    SessionKey("slack", "thread", "C1", thread_id="1700000000.000100"),
    SessionKey("discord", "channel", "99", user_id="5"),
    SessionKey("web", "dm", "3f2a9c"),
]


@pytest.mark.parametrize("key", KEYS, ids=str)
def test_every_key_shape_parses_back_from_its_string(key: SessionKey) -> None:
    assert parse_session_key(str(key)) == key


def test_keys_built_by_the_rule_parse_back() -> None:
    shared = KeyStrategy(group="shared")
    built = [
        session_key("telegram", "dm", "1", user_id="1"),
        session_key("telegram", "group", "-5", user_id="2"),
        session_key("telegram", "group", "-5", user_id="2", strategy=shared),
        session_key("slack", "channel", "C1", user_id="U1", thread_id="1.2"),
    ]
    assert [parse_session_key(str(key)) for key in built] == built


def test_a_child_agents_session_parses_as_its_parents_chat() -> None:
    parent = SessionKey("telegram", "group", "-5", user_id="2")
    child = f"{parent}/child:turn-1:call_1"
    assert parse_session_key(child) == parent


@pytest.mark.parametrize(
    "text",
    ["", "telegram", "telegram:dm", "telegram:room:1", "telegram:dm:1:2", "a:group:1:2:3", "x::1"],
)
def test_a_string_that_is_no_key_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"session key|chat type"):
        parse_session_key(text)


@pytest.mark.parametrize("key", KEYS, ids=str)
async def test_typed_keys_round_trip_through_the_store(store: SqliteStore, key: SessionKey) -> None:
    created = await store.create_session(str(key), "default")
    found = await store.get_active_session(str(key))
    assert found is not None and found.id == created.id
    assert parse_session_key(found.key) == key
