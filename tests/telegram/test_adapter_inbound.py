"""What the Telegram adapter makes of updates: events, commands, session keys, mentions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from telegram import Chat, Message, Update, User

from adapters.base import Button, ChatRef, SessionKey
from adapters.calls import Send
from adapters.session_keys import KeyStrategy, key_rule
from adapters.telegram import TelegramAdapter
from adapters.telegram.normalize import BotIdentity, Normalizer, parse_command
from tests.platform_sim.telegram_sim import ALICE, BOB, TelegramSim
from tests.telegram.conftest import AdapterFactory
from tests.telegram.harness import EventLog

GROUP = -100777


async def test_dm_text_becomes_text_event_keyed_by_chat(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    said = await telegram_sim.user_says(ALICE.id, "hello there")
    event = await events.next_event()
    assert (event.kind, event.text, event.update_id) == ("text", "hello there", said.event_id)
    assert (event.chat, event.chat_type) == (ChatRef("telegram", "42"), "dm")
    assert (event.sender.id, event.sender.name) == ("42", "Alice")
    assert str(event.session_key) == "telegram:dm:42"


async def test_command_addressed_to_this_bot_is_parsed(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    await telegram_sim.user_says(ALICE.id, "/Steer@test_bot  use the staging db ")
    event = await events.next_event()
    assert (event.kind, event.command, event.args) == ("command", "steer", "use the staging db")


async def test_command_addressed_to_another_bot_is_ignored(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    telegram_sim.add_group(GROUP)
    await telegram_sim.user_says(GROUP, "/stop@other_bot", user=ALICE)
    await telegram_sim.user_says(GROUP, "/stop", user=ALICE)
    event = await events.next_event()
    assert (event.command, len(events.events)) == ("stop", 1)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("/new", ("new", None, "")),
        ("/deny@Test_Bot abc123 too risky", ("deny", "Test_Bot", "abc123 too risky")),
        ("/etc/passwd is a file", None),
        ("not /a command", None),
    ],
)
def test_parse_command_splits_name_target_and_args(
    text: str, parsed: tuple[str, str | None, str] | None
) -> None:
    command = parse_command(text)
    assert (None if command is None else (command.name, command.target, command.args)) == parsed


async def test_two_users_in_one_group_get_separate_session_keys(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    telegram_sim.add_group(GROUP)
    await telegram_sim.user_says(GROUP, "mine", user=ALICE)
    await telegram_sim.user_says(GROUP, "mine too", user=BOB)
    await events.next_event(2)
    keys = [str(e.session_key) for e in events.events]
    assert keys == [f"telegram:group:{GROUP}:42", f"telegram:group:{GROUP}:43"]
    assert {e.chat_type for e in events.events} == {"group"}


async def test_forum_topic_is_a_thread_shared_by_its_members(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    telegram_sim.add_group(GROUP, forum=True)
    await telegram_sim.user_says(GROUP, "in topic", user=ALICE, thread=9)
    await telegram_sim.user_says(GROUP, "me too", user=BOB, thread=9)
    first, second = [await events.next_event(n) for n in (1, 2)]
    assert (
        first.session_key == second.session_key == SessionKey("telegram", "thread", str(GROUP), "9")
    )
    assert (first.chat_type, first.chat.thread_id) == ("thread", "9")


async def test_configured_shared_strategy_shares_group_sessions(
    start_adapter: AdapterFactory, telegram_sim: TelegramSim, events: EventLog
) -> None:
    await start_adapter(key_rule=key_rule(KeyStrategy(group="shared")))
    telegram_sim.add_group(GROUP)
    await telegram_sim.user_says(GROUP, "a", user=ALICE)
    await telegram_sim.user_says(GROUP, "b", user=BOB)
    await events.next_event(2)
    assert {str(e.session_key) for e in events.events} == {f"telegram:group:{GROUP}"}


def _update(chat: Chat, *, topic: int | None = None) -> Update:
    alice = User(42, "Alice", is_bot=False)
    message = Message(
        1, datetime.now(UTC), chat, from_user=alice, text="hi",
        message_thread_id=topic, is_topic_message=topic is not None,
    )  # fmt: skip
    return Update(7, message=message)


@pytest.mark.parametrize(
    ("update", "expected"),
    [
        (_update(Chat(42, Chat.PRIVATE)), "telegram:dm:42"),
        (_update(Chat(GROUP, Chat.SUPERGROUP)), f"telegram:group:{GROUP}:42"),
        (_update(Chat(-100888, Chat.CHANNEL)), "telegram:channel:-100888:42"),
        (
            _update(Chat(GROUP, Chat.SUPERGROUP, is_forum=True), topic=9),
            f"telegram:thread:{GROUP}:9",
        ),
    ],
    ids=["dm", "group", "channel", "topic"],
)
def test_default_key_rule_agrees_with_the_configured_default_strategy(
    update: Update, expected: str
) -> None:
    bot = BotIdentity(1, "test_bot")
    default = Normalizer(bot).session_key(update)
    configured = Normalizer(bot, key_rule(KeyStrategy())).session_key(update)
    assert default == configured == expected


async def test_mention_of_the_bot_is_detected(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    telegram_sim.add_group(GROUP)
    await telegram_sim.user_says(GROUP, "hey @test_bot look", user=ALICE)
    await telegram_sim.user_says(GROUP, "hey @someone_else", user=ALICE)
    await events.next_event(2)
    assert [e.mentioned for e in events.events] == [True, False]


async def test_reply_to_a_bot_message_is_detected(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    telegram_sim.add_group(GROUP)
    await adapter.perform(Send(ChatRef("telegram", str(GROUP)), "I said this"))
    said = await telegram_sim.user_says(GROUP, "and I reply", user=BOB)
    await telegram_sim.user_says(
        GROUP, "reply to bot", user=ALICE, reply_to=telegram_sim.bot_messages(GROUP)[0]
    )
    await telegram_sim.user_says(GROUP, "reply to bob", user=ALICE, reply_to=said)
    await events.next_event(3)
    assert [e.reply_to_bot for e in events.events] == [False, True, False]


async def test_button_press_becomes_button_event_of_the_presser(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    telegram_sim.add_group(GROUP)
    chat = ChatRef("telegram", str(GROUP))
    card = await adapter.perform(Send(chat, "Approve?", buttons=[[Button("Approve", "ap:x1:a")]]))
    query_id = await telegram_sim.press_button(
        telegram_sim.bot_messages(GROUP)[0], "ap:x1:a", user=BOB
    )
    event = await events.next_event()
    assert (event.kind, event.button_data, event.press_id) == ("button", "ap:x1:a", query_id)
    assert (event.message, event.sender.id) == (card, "43")
    assert str(event.session_key) == f"telegram:group:{GROUP}:43"
