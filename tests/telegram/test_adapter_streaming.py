"""The Telegram adapter's streamed answers (adapters/telegram/drafts.py) through the real
python-telegram-bot against the simulator: ``LiveText`` → ``sendMessageDraft`` with
``can_stop`` in private chats, ``StreamRefused`` where drafts cannot be shown, and the
draft's Stop press (``stopped_message_generation``) → a ``stop`` event while it is live."""

from __future__ import annotations

import asyncio

import pytest

from adapters.base import AdapterError, ChatRef, RateLimited, StreamRefused
from adapters.calls import LiveText, Send
from adapters.platforms import AdapterContext
from adapters.telegram import TelegramAdapter
from adapters.telegram.adapter import TelegramSettings
from adapters.telegram.drafts import MAX_DRAFT_UTF16, fit
from adapters.telegram.platform import PLATFORM as TELEGRAM
from adapters.telegram.platform import TelegramSection
from adapters.telegram.webhook import WebhookSettings
from core.store.sqlite import SqliteStore
from tests.platform_sim.base import SimError
from tests.platform_sim.telegram_drafts import STOP_UPDATE
from tests.platform_sim.telegram_sim import ALICE, BOB, TelegramSim
from tests.telegram.conftest import AdapterFactory
from tests.telegram.harness import EventLog

DM = ChatRef("telegram", str(ALICE.id))
BOB_DM = ChatRef("telegram", str(BOB.id))
GROUP = -100777


def replace(chat: ChatRef, text: str) -> LiveText:
    return LiveText(chat, text, "replace")


def seal(chat: ChatRef) -> LiveText:
    return LiveText(chat, "", "seal")


# capabilities and config ------------------------------------------------------------------------
async def test_capabilities_declare_native_drafts_paced_and_counted_like_messages(
    store: SqliteStore,
) -> None:
    adapter = TelegramAdapter("1:x", store, TelegramSettings())
    caps = adapter.capabilities
    assert (caps.streaming, caps.stream_interval, caps.stream_keepalive) == ("native", 1.0, 20.0)
    assert caps.stream_progress is True
    assert "live" in caps.charges.chat and "live" in caps.charges.bot
    assert "live" not in caps.charges.group  # drafts never go to groups


@pytest.mark.parametrize("mode", ["native", "edit", "off"])
async def test_streaming_config_key_reaches_the_capabilities(mode: str, store: SqliteStore) -> None:
    section = TelegramSection(token="1:x", streaming=mode)  # type: ignore[arg-type]
    assert TELEGRAM.build is not None
    adapter = TELEGRAM.build(section, AdapterContext(store=store))
    assert adapter.capabilities.streaming == mode


def test_a_wrong_streaming_value_is_one_readable_error() -> None:
    with pytest.raises(ValueError, match=r"native.*edit.*off"):
        TelegramSection.read({"token": "1:x", "streaming": "drafts"})


# drafts ------------------------------------------------------------------------------------------
async def test_a_stream_is_one_draft_with_can_stop_and_a_seal_starts_a_new_one(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    sim = telegram_sim
    sim.chat(ALICE.id)
    await adapter.perform(replace(DM, "Hel"))
    await adapter.perform(replace(DM, "Hello wor"))
    await adapter.perform(seal(DM))
    await adapter.perform(Send(DM, "Hello world", markup=False))
    await adapter.perform(replace(DM, "Next"))
    first, second = sim.drafts.of(ALICE.id)
    assert [v.text for v in first.versions] == ["Hel", "Hello wor"]
    assert all(v.can_stop and v.keep_on_stop for v in first.versions)
    assert first.state == "dismissed"  # the real message replaced it
    assert second.draft_id != first.draft_id and second.text == "Next"
    assert [m.text for m in sim.bot_messages(ALICE.id)] == ["Hello world"]  # no duplicate
    assert adapter.drafts.live(DM) == second.draft_id


async def test_append_adds_and_an_empty_replace_makes_no_call_and_keeps_the_draft(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    sim = telegram_sim
    sim.chat(ALICE.id)
    await adapter.perform(replace(BOB_DM, ""))  # nothing live: nothing to clear
    await adapter.perform(LiveText(DM, "one ", "append"))
    await adapter.perform(LiveText(DM, "two", "append"))
    await adapter.perform(replace(DM, ""))  # a preamble reset: no call, the draft stays
    (draft,) = sim.drafts.of(ALICE.id)
    assert adapter.drafts.live(DM) == draft.draft_id
    await sim.press_stop(ALICE.id)  # its Stop still counts
    assert (await events.next_event()).stream_id == str(draft.draft_id)
    assert [v.text for v in draft.versions] == ["one ", "one two"]
    assert len(sim.calls_to("sendMessageDraft")) == 2


async def test_a_real_message_keeps_a_draft_with_text_and_ends_an_empty_one(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    sim = telegram_sim
    sim.chat(ALICE.id)
    await adapter.perform(replace(DM, "checking"))
    await adapter.perform(Send(DM, "Approve?", markup=False))  # a card mid-turn
    await adapter.perform(replace(DM, "checking"))  # the keepalive draws it again
    first = sim.drafts.of(ALICE.id)[0]
    assert (len(sim.drafts.of(ALICE.id)), first.state, len(first.versions)) == (1, "live", 2)
    await adapter.perform(replace(DM, ""))  # the turn was stopped: cleared
    await adapter.perform(Send(DM, "Stopped.", markup=False))
    assert adapter.drafts.live(DM) is None
    await adapter.perform(replace(DM, "the next turn"))
    assert sim.drafts.of(ALICE.id)[-1].draft_id != first.draft_id


async def test_a_topic_of_a_private_chat_gets_its_own_draft(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    telegram_sim.chat(ALICE.id)
    await adapter.perform(replace(ChatRef("telegram", str(ALICE.id), "5"), "in the topic"))
    (draft,) = telegram_sim.drafts.of(ALICE.id)
    assert (draft.thread, draft.text) == (5, "in the topic")


def test_a_long_text_keeps_its_newest_4096_units() -> None:
    text = "😀" + "x" * 5000 + "end"
    shown = fit(text)
    assert shown.endswith("end") and shown.startswith("…")
    assert len(shown.encode("utf-16-le")) // 2 == MAX_DRAFT_UTF16
    assert fit("short") == "short"


async def test_groups_are_refused_at_once_without_a_call(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    telegram_sim.add_group(GROUP, forum=True)
    for chat in (ChatRef("telegram", str(GROUP)), ChatRef("telegram", str(GROUP), "7")):
        with pytest.raises(StreamRefused, match="private chats"):
            await adapter.perform(replace(chat, "partial"))
    assert telegram_sim.calls_to("sendMessageDraft") == []


@pytest.mark.parametrize(
    "error",
    [
        SimError.platform("Bad Request: TEXTDRAFT_PEER_INVALID"),
        SimError.platform("Bad Request: chat not found"),
        SimError.forbidden(),
    ],
)
async def test_any_draft_refusal_is_stream_refused(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, error: SimError
) -> None:
    telegram_sim.chat(ALICE.id)
    telegram_sim.fail_next("sendMessageDraft", error)
    with pytest.raises(StreamRefused, match=f"telegram chat {ALICE.id}"):
        await adapter.perform(replace(DM, "partial"))
    assert adapter.drafts.live(DM) is None


async def test_a_chat_the_simulator_refuses_is_stream_refused(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    telegram_sim.refuse_drafts(ALICE.id)
    with pytest.raises(StreamRefused, match="Textdraft_peer_invalid"):
        await adapter.perform(replace(DM, "partial"))


async def test_flood_control_and_network_failures_are_not_refusals(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    telegram_sim.chat(ALICE.id)
    telegram_sim.fail_next("sendMessageDraft", SimError.rate_limit(2))
    with pytest.raises(RateLimited) as limited:
        await adapter.perform(replace(DM, "partial"))
    assert limited.value.retry_after == 2
    telegram_sim.fail_next("sendMessageDraft", SimError.server_error(502))
    with pytest.raises(AdapterError) as failed:
        await adapter.perform(replace(DM, "partial"))
    assert not isinstance(failed.value, StreamRefused | RateLimited)
    await adapter.perform(replace(DM, "partial"))  # the same draft, drawn at last
    assert len(telegram_sim.drafts.of(ALICE.id)) == 1


# the Stop button ---------------------------------------------------------------------------------
async def test_stop_on_the_live_draft_is_one_stop_event_and_nothing_more_is_drawn(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    sim = telegram_sim
    sim.chat(ALICE.id)
    await adapter.perform(replace(DM, "working on it"))
    draft_id = sim.drafts.of(ALICE.id)[0].draft_id
    pressed = await sim.press_stop(ALICE.id)
    event = await events.next_event()
    assert (event.kind, event.stream_id, event.update_id) == (
        "stop", str(draft_id), str(pressed.update_id),
    )  # fmt: skip
    assert (event.chat, event.chat_type, event.sender.id) == (DM, "dm", str(ALICE.id))
    assert str(event.session_key) == f"telegram:dm:{ALICE.id}"
    await adapter.perform(replace(DM, "working on it, more"))
    assert len(sim.calls_to("sendMessageDraft")) == 1  # a stopped draft is not drawn again
    await sim.stop_update(ALICE.id, draft_id)  # the same press delivered twice
    await adapter.perform(seal(DM))
    await sim.wait_for(lambda: not sim.pending())
    await adapter.drain()
    assert [e.kind for e in events.events] == ["stop"]


async def test_the_bot_asks_telegram_for_the_stop_update(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    await telegram_sim.wait_for(lambda: telegram_sim.calls_to("getUpdates"))
    assert STOP_UPDATE in telegram_sim.calls_to("getUpdates")[-1].params["allowed_updates"]


async def test_a_webhook_asks_for_the_stop_update_and_gets_the_press(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, events: EventLog
) -> None:
    adapter = await start_adapter(webhook=WebhookSettings(secret_token="s3cret", port=0))
    (hook,) = telegram_sim.calls_to("setWebhook")
    assert STOP_UPDATE in hook.params["allowed_updates"]
    telegram_sim.chat(ALICE.id)
    await adapter.perform(replace(DM, "working"))
    await telegram_sim.press_stop(ALICE.id)
    assert (await events.next_event()).kind == "stop"


async def test_a_stop_for_an_ended_or_unknown_draft_changes_nothing(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog, store: SqliteStore
) -> None:
    sim = telegram_sim
    sim.chat(ALICE.id)
    await adapter.perform(replace(DM, "answer"))
    draft_id = sim.drafts.of(ALICE.id)[0].draft_id
    await adapter.perform(seal(DM))
    late = await sim.stop_update(ALICE.id, draft_id)
    await adapter.perform(replace(DM, "the next answer"))
    unknown = await sim.stop_update(ALICE.id, draft_id + 1000)
    other = await sim.stop_update(BOB.id, draft_id)
    await sim.wait_for(lambda: not sim.pending())
    await adapter.drain()
    assert events.events == []
    for update in (late, unknown, other):
        record = await store.get_inbound("telegram", str(update.update_id))
        assert record is not None and record.state == "done"
    assert await store.list_dead_letters("telegram") == []


async def test_a_stop_replayed_after_a_restart_changes_nothing(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    sim = telegram_sim
    sim.chat(ALICE.id)
    events.gate = asyncio.Event()  # the first run never finishes handling the stop
    first = await start_adapter()
    await first.perform(replace(DM, "working"))
    await sim.press_stop(ALICE.id)
    assert (await events.next_event()).kind == "stop"
    await first.stop()
    assert len(await store.unfinished_inbound("telegram")) == 1
    after_restart = EventLog()
    second = await start_adapter(sink=after_restart)
    await second.drain()
    assert after_restart.events == []
    assert await store.unfinished_inbound("telegram") == []


async def test_a_malformed_stop_update_is_a_dead_letter(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, store: SqliteStore, events: EventLog
) -> None:
    chat = telegram_sim.chat(ALICE.id).to_json()
    await telegram_sim.push_raw({STOP_UPDATE: {"chat": chat, "draft_id": "seven"}})
    await telegram_sim.wait_for(lambda: not telegram_sim.pending())
    await adapter.drain()
    (letter,) = await store.list_dead_letters("telegram")
    assert "draft_id must be integers" in letter.error
    assert events.events == []
