"""A batch python-telegram-bot cannot parse is logged once, short, without the user's text
(PTB itself would log the whole batch at CRITICAL with a traceback)."""

from __future__ import annotations

import logging

import pytest

from adapters.telegram import TelegramAdapter
from core.store.sqlite import SqliteStore
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.telegram.harness import EventLog

USER_TEXT = "my private words " * 500


async def test_an_unparsable_batch_is_logged_once_short_and_without_user_text(
    adapter: TelegramAdapter,
    telegram_sim: TelegramSim,
    store: SqliteStore,
    events: EventLog,
    caplog: pytest.LogCaptureFixture,
) -> None:
    chat = {"id": ALICE.id, "type": "private", "first_name": "Alice"}
    no_date = {"message_id": 7, "chat": chat, "from": ALICE.to_json(), "text": USER_TEXT}
    with caplog.at_level(logging.INFO):
        broken = await telegram_sim.push_raw({"message": no_date})
        await telegram_sim.user_says(ALICE.id, "and then a normal message")
        assert (await events.next_event()).text == "and then a normal message"
        await telegram_sim.wait_for(lambda: telegram_sim.is_confirmed(broken.update_id))
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    [line] = loud
    assert line.getMessage().startswith(f"telegram item {broken.update_id} quarantined as dead")
    assert line.levelname == "WARNING" and line.exc_info is None and len(line.getMessage()) < 400
    assert not any("private words" in r.getMessage() for r in caplog.records)
    assert not any(r.levelno >= logging.CRITICAL for r in caplog.records)
    [letter] = await store.list_dead_letters()
    assert USER_TEXT in letter.raw  # kept whole for the operator, never logged


async def test_ptb_logs_the_batch_without_our_filter(telegram_sim: TelegramSim) -> None:
    """The filter is what keeps it out: PTB's own record holds the user's text."""
    from telegram import Bot

    from adapters.telegram.polling import UnparsedBatchFilter

    record = logging.LogRecord(
        Bot._LOGGER.name, logging.CRITICAL, __file__, 1,
        "Error while parsing updates! Received data was %r", ([{"text": USER_TEXT}],), None,
    )  # fmt: skip
    assert "private words" in record.getMessage()
    assert UnparsedBatchFilter().filter(record) is False
    other = logging.LogRecord("telegram.Bot", logging.INFO, __file__, 1, "ok", (), None)
    assert UnparsedBatchFilter().filter(other) is True
