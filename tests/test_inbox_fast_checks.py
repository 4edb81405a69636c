"""The inbox's per-item checks cost nothing for an ordinary item (issue 29 point 4) and
still find what they look for: an integer outside 64 bits in a stored item's JSON, and a
session key parsed once however often its string comes back."""

from __future__ import annotations

import json
import random

import pytest

from adapters.inbox import unstorable_in_json, unstorable_value
from adapters.session_keys import parse_session_key

EDGES = (2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**18, 10**19, -(10**19), 7, 0)


@pytest.mark.parametrize("number", EDGES)
def test_an_integer_at_the_edge_of_64_bits_is_judged_as_by_the_walk(number: int) -> None:
    data = {"update_id": 1, "message": {"chat": {"id": number}, "text": "1234567890123456789"}}
    raw = json.dumps(data)
    assert unstorable_in_json(raw) == unstorable_value(data)


def test_random_items_are_judged_as_by_the_walk() -> None:
    rng = random.Random(29)
    for _ in range(2000):
        number = rng.choice((rng.randint(-(2**70), 2**70), rng.randint(-(10**18), 10**18)))
        data = {"a": [1, {"b": number}], "c": str(rng.randint(0, 10**25)), "d": True}
        assert unstorable_in_json(json.dumps(data)) == unstorable_value(data)


def test_an_ordinary_item_is_storable() -> None:
    assert unstorable_in_json('{"update_id": 5, "message": {"chat": {"id": -1001234}}}') is None


def test_a_key_string_is_parsed_once() -> None:
    text = "telegram:group:-100529:77"
    first = parse_session_key(text)
    assert parse_session_key(text) is first
    assert (first.chat_type, first.chat_id, first.user_id) == ("group", "-100529", "77")


def test_a_bad_key_still_raises_every_time() -> None:
    for _ in range(2):
        with pytest.raises(ValueError):
            parse_session_key("telegram:nope:1")
