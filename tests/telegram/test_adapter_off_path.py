"""What is off is not on the Telegram adapter's path (issue 29 point 4): with ``streaming``
``edit`` or ``off`` the adapter holds no draft streams — a send looks for none, a
``LiveText`` call is refused, a draft's Stop is never a live one — and an outbound call's
PTB error is still translated into the adapter error tree (now once, at ``perform``)."""

from __future__ import annotations

import pytest

from adapters.base import ChatRef, MessageGone, StreamRefused
from adapters.calls import Delete, LiveText, Send
from adapters.events import SentMessage
from adapters.telegram import TelegramAdapter
from adapters.telegram.adapter import TelegramSettings
from core.store.sqlite import SqliteStore
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.telegram.conftest import AdapterFactory
from tests.telegram.harness import EventLog

DM = ChatRef("telegram", str(ALICE.id))


@pytest.mark.parametrize("mode", ["edit", "off"])
async def test_a_bot_that_streams_no_drafts_holds_none(mode: str, store: SqliteStore) -> None:
    adapter = TelegramAdapter("1:x", store, TelegramSettings(streaming=mode))  # type: ignore[arg-type]
    assert adapter.drafts is None


async def test_native_streaming_builds_the_drafts(store: SqliteStore) -> None:
    assert TelegramAdapter("1:x", store, TelegramSettings()).drafts is not None


async def test_with_streaming_off_a_send_goes_and_live_text_is_refused(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim
) -> None:
    adapter = await start_adapter(streaming="off")
    telegram_sim.chat(ALICE.id)
    sent = await adapter.perform(Send(DM, "hello", markup=False))
    assert sent is not None and telegram_sim.calls_to("sendMessage")
    with pytest.raises(StreamRefused):
        await adapter.perform(LiveText(DM, "partial", "replace"))
    assert telegram_sim.calls_to("sendMessageDraft") == []


async def test_with_streaming_off_a_stop_press_is_done_without_an_event(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, events: EventLog,
    store: SqliteStore,
) -> None:  # fmt: skip
    adapter = await start_adapter(streaming="off")
    telegram_sim.chat(ALICE.id)
    update = await telegram_sim.stop_update(ALICE.id, 7)
    await telegram_sim.wait_for(lambda: not telegram_sim.pending())
    await adapter.drain()
    record = await store.get_inbound("telegram", str(update.update_id))
    assert record is not None and record.state == "done"
    assert events.events == []


async def test_an_outbound_error_is_still_translated(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim
) -> None:
    adapter = await start_adapter(streaming="off")
    telegram_sim.chat(ALICE.id)
    with pytest.raises(MessageGone):
        await adapter.perform(Delete(SentMessage(DM, "424242")))
