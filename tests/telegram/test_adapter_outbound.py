"""The Telegram adapter's outbound half against the simulator: send, edit, delete, buttons,
answers, typing, the command menu, and how Bot API errors arrive as our error tree."""

from __future__ import annotations

import logging

import pytest

from adapters.base import (
    BadMarkup,
    Button,
    ChatRef,
    Forbidden,
    InboundEvent,
    MessageGone,
    NotModified,
    RateLimited,
    Sender,
    SessionKey,
    TooLong,
)
from adapters.calls import AnswerPress, Delete, Edit, Send, Typing
from adapters.telegram import TelegramAdapter
from core.store.sqlite import SqliteStore
from tests.platform_sim.base import SimError
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.telegram.conftest import AdapterFactory
from tests.telegram.harness import EventLog, sim_settings

DM = ChatRef("telegram", str(ALICE.id))
APPROVE = [[Button("Approve", "ap:abc:a"), Button("Deny", "ap:abc:d")]]


@pytest.fixture(autouse=True)
def alice_has_started_the_bot(telegram_sim: TelegramSim) -> None:
    telegram_sim.chat(ALICE.id)  # Telegram only lets a bot write to users who wrote first


async def test_send_delivers_html_with_inline_keyboard(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    sent = await adapter.perform(Send(DM, "<b>Run</b> this?", buttons=APPROVE))
    [msg] = telegram_sim.bot_messages(ALICE.id)
    assert (sent.message_id, msg.text) == (msg.id, "Run this?")
    assert msg.raw["entities"] == [{"type": "bold", "offset": 0, "length": 3}]
    assert [(b.label, b.data) for b in msg.buttons] == [
        ("Approve", "ap:abc:a"),
        ("Deny", "ap:abc:d"),
    ]


async def test_plain_send_keeps_markup_characters_literally(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    await adapter.perform(Send(DM, "a <b> tag & <unclosed", markup=False))
    [msg] = telegram_sim.bot_messages(ALICE.id)
    assert msg.text == "a <b> tag & <unclosed"
    assert telegram_sim.calls_to("sendMessage")[-1].params.get("parse_mode") is None


async def test_edit_replaces_text_and_removes_buttons(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    sent = await adapter.perform(Send(DM, "Approve?", buttons=APPROVE))
    await adapter.perform(Edit(sent, "✅ Approved by <i>Alice</i>"))
    [msg] = telegram_sim.bot_messages(ALICE.id)
    assert (msg.text, msg.buttons, len(msg.history)) == ("✅ Approved by Alice", [], 1)


async def test_edit_with_identical_content_raises_not_modified(adapter: TelegramAdapter) -> None:
    sent = await adapter.perform(Send(DM, "same", buttons=APPROVE))
    with pytest.raises(NotModified):
        await adapter.perform(Edit(sent, "same", buttons=APPROVE))


async def test_delete_removes_message_and_second_delete_is_message_gone(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    sent = await adapter.perform(Send(DM, "progress"))
    await adapter.perform(Delete(sent))
    assert telegram_sim.bot_messages(ALICE.id)[0].deleted
    with pytest.raises(MessageGone):
        await adapter.perform(Delete(sent))


async def test_edit_of_deleted_message_raises_message_gone(adapter: TelegramAdapter) -> None:
    sent = await adapter.perform(Send(DM, "progress"))
    await adapter.perform(Delete(sent))
    with pytest.raises(MessageGone):
        await adapter.perform(Edit(sent, "later"))


async def test_malformed_html_raises_bad_markup(adapter: TelegramAdapter) -> None:
    with pytest.raises(BadMarkup):
        await adapter.perform(Send(DM, "<b>unclosed"))


async def test_text_over_4096_utf16_units_raises_too_long(adapter: TelegramAdapter) -> None:
    assert adapter.capabilities.max_text_length == 4096
    assert adapter.capabilities.length_unit == "utf16"
    await adapter.perform(Send(DM, "😀" * 2048, markup=False))  # 4096 UTF-16 units: fits
    with pytest.raises(TooLong):
        await adapter.perform(Send(DM, "😀" * 2048 + "x", markup=False))


async def test_blocked_user_raises_forbidden(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    telegram_sim.fail_next("sendMessage", SimError.forbidden())
    with pytest.raises(Forbidden):
        await adapter.perform(Send(DM, "hello"))


async def test_a_429_is_raised_at_once_with_retry_after_and_never_retried_by_the_sdk(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    telegram_sim.fail_next("sendMessage", SimError.rate_limit(3))
    with pytest.raises(RateLimited) as caught:
        await adapter.perform(Send(DM, "hello"))
    assert caught.value.retry_after == 3
    assert len(telegram_sim.calls_to("sendMessage")) == 1


async def test_button_payload_over_64_bytes_is_refused_before_sending(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    with pytest.raises(ValueError, match="64"):
        await adapter.perform(Send(DM, "x", buttons=[[Button("Too long", "x" * 65)]]))
    assert telegram_sim.calls_to("sendMessage") == []


async def test_answer_button_answers_the_callback_query_with_notice(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    sent = await adapter.perform(Send(DM, "Approve?", buttons=APPROVE))
    query_id = await telegram_sim.press_button(
        telegram_sim.bot_messages(ALICE.id)[0], "ap:abc:a", user=ALICE
    )
    press = await events.next_event()
    assert (press.press_id, press.message) == (query_id, sent)
    await adapter.perform(AnswerPress(press, "Only the requester can decide"))
    assert telegram_sim.answers[query_id] == {"text": "Only the requester can decide"}


async def test_answer_button_without_press_id_calls_nothing(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    event = InboundEvent(
        kind="text", platform="telegram", update_id="1", chat=DM, chat_type="dm",
        sender=Sender("42", "Alice"), session_key=SessionKey("telegram", "dm", "42"),
    )  # fmt: skip
    await adapter.perform(AnswerPress(event))
    assert telegram_sim.calls_to("answerCallbackQuery") == []


async def test_typing_shows_chat_action_inside_forum_topic(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    forum = telegram_sim.add_group(-1001, "Forum", forum=True)
    await telegram_sim.user_says(forum, "open topic", thread=7)
    await adapter.perform(Typing(ChatRef("telegram", "-1001", "7")))
    assert [(a, t) for a, t, _ in telegram_sim.chat_actions(forum)] == [("typing", 7)]


async def test_send_into_forum_topic_lands_in_that_topic(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    forum = telegram_sim.add_group(-1001, "Forum", forum=True)
    await telegram_sim.user_says(forum, "open topic", thread=7)
    await adapter.perform(Send(ChatRef("telegram", "-1001", "7"), "in the topic"))
    assert telegram_sim.last_bot_message(forum).thread == "7"  # type: ignore[union-attr]


async def test_start_publishes_the_command_menu(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim
) -> None:
    await start_adapter(commands=[("stop", "Stop the current task"), ("new", "Fresh session")])
    assert telegram_sim.commands() == [
        {"command": "stop", "description": "Stop the current task"},
        {"command": "new", "description": "Fresh session"},
    ]


async def test_capabilities_describe_telegram(start_adapter: AdapterFactory) -> None:
    adapter = await start_adapter(edit_interval=0.3)
    caps = adapter.capabilities
    assert (caps.button_payload_limit, caps.edit_interval, caps.markup) == (
        64, 0.3, "telegram_html",
    )  # fmt: skip
    assert caps.supports_edit


async def test_wrong_token_leaves_telegram_down_with_one_error_naming_the_fix(
    telegram_sim: TelegramSim, store: SqliteStore, events: EventLog,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    adapter = TelegramAdapter("999:WRONG", store, sim_settings(telegram_sim))
    with caplog.at_level(logging.WARNING):
        await adapter.start(events)
    assert adapter.health.state == "down" and "@BotFather" in adapter.health.reason
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "[telegram] token" in errors[0] and "WRONG" not in errors[0]
    assert telegram_sim.calls_to("getUpdates") == []
    await adapter.stop()
    assert await store.unfinished_inbound("telegram") == []
