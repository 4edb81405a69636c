""":func:`adapters.telegram.normalize.valid_update` reads the inbox's JSON of an update for
surrogates instead of serialising the update again (issue 29 point 4)."""

from __future__ import annotations

import json

from telegram import Update

from adapters.telegram.normalize import valid_update


def update_with(text: str) -> tuple[Update, str]:
    """An update with ``text`` and its JSON as the inbox stores it (``json.dumps``)."""
    data = {
        "update_id": 7,
        "message": {
            "message_id": 1, "date": 0, "text": text,
            "chat": {"id": 42, "type": "private"},
            "from": {"id": 42, "is_bot": False, "first_name": "Alice"},
        },
    }  # fmt: skip
    return Update.de_json(data, None), json.dumps(data)


def text_of(update: Update) -> str:
    assert update.message is not None and update.message.text is not None
    return update.message.text


def test_a_lone_surrogate_seen_in_the_json_is_replaced() -> None:
    update, raw = update_with("half \ud83d of a pair")
    assert text_of(valid_update(update, raw)) == "half \ufffd of a pair"
    assert text_of(valid_update(update)) == "half \ufffd of a pair"  # read from the update


def test_a_whole_pair_in_the_json_is_kept_as_it_is() -> None:
    update, raw = update_with("a smile 😀")
    assert "\\ud83d\\ude00" in raw
    assert valid_update(update, raw) is update


def test_json_without_a_surrogate_escape_is_trusted_without_looking_at_the_update() -> None:
    """The JSON is the update's own, so it alone is read: given one with no escape, even an
    update holding a lone surrogate comes back as it is (nothing serialised it again)."""
    update, _ = update_with("half \ud83d of a pair")
    _, plain_raw = update_with("plain")
    assert valid_update(update, plain_raw) is update
