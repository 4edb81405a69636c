"""Contract tests: the real python-telegram-bot against the Telegram simulator."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.error import BadRequest, Conflict, Forbidden, InvalidToken, NetworkError, RetryAfter
from telegram.ext import (
    Application,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from tests.platform_sim.base import SimError
from tests.platform_sim.telegram_sim import ALICE, BOB, FloodLimits, TelegramSim
from tests.support.ptb import plain_http, sim_bot

Ctx = ContextTypes.DEFAULT_TYPE
APPROVE = InlineKeyboardMarkup([[InlineKeyboardButton("Approve", callback_data="approve:1")]])


def make_bot(sim: TelegramSim, token: str | None = None) -> Bot:
    return sim_bot(sim, token)


@pytest.fixture
async def bot(telegram_sim: TelegramSim) -> AsyncIterator[Bot]:
    async with make_bot(telegram_sim) as b:
        yield b


@asynccontextmanager
async def running_app(
    sim: TelegramSim, *handlers: Any
) -> AsyncIterator[Application[Any, Any, Any, Any, Any, Any]]:
    app = (Application.builder().token(sim.token).base_url(f"{sim.url}/bot")
           .base_file_url(f"{sim.url}/file/bot").request(plain_http())
           .get_updates_request(plain_http()).build())  # fmt: skip
    for handler in handlers:
        app.add_handler(handler)
    await app.initialize()
    await app.start()
    assert app.updater is not None
    await app.updater.start_polling(poll_interval=0, timeout=1)
    try:
        yield app
    finally:
        await app.updater.stop()
        await app.stop()
        await app.shutdown()


# the library contract ---------------------------------------------------------------------------
async def test_ptb_application_handles_command_text_and_button_then_edits(
    telegram_sim: TelegramSim,
) -> None:
    async def start(update: Update, _: Ctx) -> None:
        assert update.message is not None
        await update.message.reply_text("Approve?", reply_markup=APPROVE)

    async def echo(update: Update, _: Ctx) -> None:
        assert update.message is not None
        await update.message.reply_text(f"echo: {update.message.text}")

    async def pressed(update: Update, _: Ctx) -> None:
        query = update.callback_query
        assert query is not None
        await query.answer("done")
        await query.edit_message_text(f"approved by {query.from_user.first_name}")

    handlers = (CommandHandler("start", start), CallbackQueryHandler(pressed),
                MessageHandler(filters.TEXT & ~filters.COMMAND, echo))  # fmt: skip
    async with running_app(telegram_sim, *handlers):
        await telegram_sim.user_says(ALICE.id, "/start")
        prompt = await telegram_sim.wait_for_bot_message(ALICE.id)
        await telegram_sim.user_says(ALICE.id, "hello")
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "echo: hello")
        query_id = await telegram_sim.press_button(prompt, prompt.button("Approve").data or "")
        await telegram_sim.wait_for(lambda: prompt.text == "approved by Alice")
    assert telegram_sim.answers[query_id] == {"text": "done"}
    assert [v["text"] for v in prompt.history] == ["Approve?"]
    assert prompt.buttons == []  # edit_message_text without reply_markup drops the keyboard
    assert [c.method for c in telegram_sim.calls[:2]] == ["getMe", "deleteWebhook"]


async def test_command_addressed_to_the_bot_in_a_group_fires_command_handler(
    telegram_sim: TelegramSim,
) -> None:
    async def helper(update: Update, _: Ctx) -> None:
        assert update.message is not None
        await update.message.reply_text(f"help for {update.message.chat.type}")

    async with running_app(telegram_sim, CommandHandler("help", helper)):
        said = await telegram_sim.user_says(-100500, "/help@test_bot now", user=BOB)
        reply = await telegram_sim.wait_for_bot_message(-100500)
    assert reply.text == "help for supergroup"
    assert said.raw["entities"] == [{"type": "bot_command", "offset": 0, "length": 14}]


async def test_reply_in_forum_topic_stays_in_the_topic(telegram_sim: TelegramSim) -> None:
    forum = telegram_sim.add_group(-100777, "Forum", forum=True)

    async def answer(update: Update, _: Ctx) -> None:
        assert update.message is not None and update.message.is_topic_message
        await update.message.reply_text("in topic", do_quote=False)

    async with running_app(telegram_sim, MessageHandler(filters.TEXT, answer)):
        await telegram_sim.user_says(forum, "question", thread=7)
        reply = await telegram_sim.wait_for_bot_message(forum)
    assert reply.thread == "7"
    assert reply.raw["is_topic_message"] is True


# getMe and getUpdates ---------------------------------------------------------------------------
async def test_get_me_reports_the_bot_user(bot: Bot) -> None:
    me = await bot.get_me()
    assert (me.is_bot, me.username, me.id) == (True, "test_bot", 123456)


async def test_update_is_confirmed_only_by_a_later_offset(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    said = await telegram_sim.user_says(ALICE.id, "hi")
    update_id = int(said.event_id or 0)
    first = await bot.get_updates(timeout=0)
    again = await bot.get_updates(timeout=0)
    assert [u.update_id for u in first] == [u.update_id for u in again] == [update_id]
    assert not telegram_sim.is_confirmed(update_id)
    assert await bot.get_updates(offset=update_id + 1, timeout=0) == ()
    assert telegram_sim.is_confirmed(update_id)
    assert [(c.offset, c.update_ids) for c in telegram_sim.confirmations] == [
        (update_id + 1, [update_id])
    ]


async def test_get_updates_with_timeout_zero_returns_at_once(bot: Bot) -> None:
    started = time.monotonic()
    assert await bot.get_updates(timeout=0) == ()
    assert time.monotonic() - started < 1.0  # a long poll would hold it for its timeout


async def test_long_poll_answers_as_soon_as_a_user_speaks(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    poll = asyncio.create_task(bot.get_updates(timeout=20))
    await telegram_sim.wait_for(telegram_sim.in_flight_polls)
    started = time.monotonic()
    await telegram_sim.user_says(ALICE.id, "wake up")
    updates = await asyncio.wait_for(poll, 5)
    assert [u.message.text for u in updates if u.message] == ["wake up"]
    assert time.monotonic() - started < 1


async def test_get_updates_honours_limit_and_allowed_updates(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    for text in ("one", "two", "three"):
        await telegram_sim.user_says(ALICE.id, text)
    limited = await bot.get_updates(limit=2, timeout=0)
    assert [u.message.text for u in limited if u.message] == ["one", "two"]
    only_callbacks = await bot.get_updates(timeout=0, allowed_updates=["callback_query"])
    assert only_callbacks == ()
    assert telegram_sim.pending() == []


async def test_a_second_poller_terminates_the_first_with_conflict(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    first = asyncio.create_task(bot.get_updates(timeout=20))
    await telegram_sim.wait_for(telegram_sim.in_flight_polls)
    async with make_bot(telegram_sim) as other:
        await other.get_updates(timeout=0)
    with pytest.raises(Conflict, match="terminated by other getUpdates request"):
        await asyncio.wait_for(first, 5)


async def test_wrong_token_is_rejected_as_invalid(telegram_sim: TelegramSim) -> None:
    with pytest.raises(InvalidToken, match="was rejected by the server"):
        async with make_bot(telegram_sim, "999:WRONG"):
            pass


# sending and its limits -------------------------------------------------------------------------
async def test_html_parse_mode_becomes_plain_text_with_entities(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    telegram_sim.chat(ALICE.id)
    sent = await bot.send_message(ALICE.id, "<b>bold</b> &amp; <a href='https://x.y'>link</a>",
                                  parse_mode="HTML")  # fmt: skip
    assert sent.text == "bold & link"
    assert [(e.type, e.offset, e.length) for e in sent.entities] == [
        ("bold", 0, 4), ("text_link", 7, 4)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "mode", "plain", "entities"),
    [
        ("*bold* and _it_", "MarkdownV2", "bold and it", [("bold", 0, 4), ("italic", 9, 2)]),
        ("[docs](https://x.y) `c`", "MarkdownV2", "docs c", [("text_link", 0, 4), ("code", 5, 1)]),
        ("Done\\. 😀 __u__", "MarkdownV2", "Done. 😀 u", [("underline", 9, 1)]),
        ("<pre><code class='language-py'>x</code></pre>", "HTML", "x", [("pre", 0, 1)]),
        ("&lt;a&gt; &nbsp;&#128512;", "HTML", "<a> &nbsp;😀", []),
        ("<blockquote expandable>q</blockquote>", "HTML", "q", [("expandable_blockquote", 0, 1)]),
    ],
)
async def test_markup_becomes_entities_in_utf16_offsets(
    telegram_sim: TelegramSim, bot: Bot, text: str, mode: str, plain: str,
    entities: list[tuple[str, int, int]],
) -> None:  # fmt: skip
    telegram_sim.chat(ALICE.id)
    sent = await bot.send_message(ALICE.id, text, parse_mode=mode)
    assert sent.text == plain
    assert [(e.type, e.offset, e.length) for e in sent.entities] == entities


@pytest.mark.parametrize(
    ("text", "mode", "error"),
    [
        ("<b>open", "HTML", 'Can\'t find end tag corresponding to start tag "b"'),
        ("<b>x</i>", "HTML", "Unmatched end tag at byte offset 4"),
        ("a <x> b", "HTML", 'Unsupported start tag "x" at byte offset 2'),
        ("Done.", "MarkdownV2", "Character '.' is reserved"),
        ("*bold", "MarkdownV2", "Can't find end of Bold entity at byte offset 0"),
    ],
)
async def test_malformed_markup_cannot_be_parsed(
    telegram_sim: TelegramSim, bot: Bot, text: str, mode: str, error: str
) -> None:
    telegram_sim.chat(ALICE.id)
    with pytest.raises(BadRequest, match="Can't parse entities") as caught:
        await bot.send_message(ALICE.id, text, parse_mode=mode)
    assert error.lower() in caught.value.message.lower()  # PTB lower-cases the description
    assert telegram_sim.bot_messages(ALICE.id) == []


async def test_text_limit_counts_utf16_code_units(telegram_sim: TelegramSim, bot: Bot) -> None:
    telegram_sim.chat(ALICE.id)
    await bot.send_message(ALICE.id, "😀" * 2048)  # 4096 UTF-16 units
    with pytest.raises(BadRequest, match="Message is too long"):
        await bot.send_message(ALICE.id, "😀" * 2049)  # 2049 code points, 4098 units


async def test_callback_data_over_64_bytes_is_rejected(telegram_sim: TelegramSim, bot: Bot) -> None:
    telegram_sim.chat(ALICE.id)
    too_long = {"inline_keyboard": [[{"text": "x", "callback_data": "é" * 33}]]}
    with pytest.raises(BadRequest, match="Button_data_invalid"):
        await bot.send_message(ALICE.id, "pick", reply_markup=too_long)  # type: ignore[arg-type]


async def test_unknown_chat_is_not_found(bot: Bot) -> None:
    with pytest.raises(BadRequest, match="Chat not found"):
        await bot.send_message(777, "hello?")


async def test_forum_topic_must_exist(telegram_sim: TelegramSim, bot: Bot) -> None:
    forum = telegram_sim.add_group(-100777, "Forum", forum=True)
    with pytest.raises(BadRequest, match="Message thread not found"):
        await bot.send_message(forum.id, "hi", message_thread_id=99)


async def test_reply_to_a_user_message_carries_it(telegram_sim: TelegramSim, bot: Bot) -> None:
    said = await telegram_sim.user_says(ALICE.id, "question")
    sent = await bot.send_message(ALICE.id, "answer", reply_to_message_id=int(said.id))
    assert sent.reply_to_message is not None and sent.reply_to_message.text == "question"


async def test_user_message_marks_commands_and_mentions(telegram_sim: TelegramSim) -> None:
    said = await telegram_sim.user_says(-100500, "hey @test_bot run /go")
    assert said.raw["entities"] == [
        {"type": "mention", "offset": 4, "length": 9},
        {"type": "bot_command", "offset": 18, "length": 3},
    ]
    assert said.raw["chat"]["type"] == "supergroup"


async def test_user_edit_arrives_as_edited_message(telegram_sim: TelegramSim, bot: Bot) -> None:
    said = await telegram_sim.user_says(ALICE.id, "/stat")
    await telegram_sim.user_edits(said, "/status")
    updates = await bot.get_updates(timeout=0)
    edited = updates[-1].edited_message
    assert edited is not None and edited.text == "/status" and edited.message_id == int(said.id)
    assert [v["text"] for v in said.history] == ["/stat"]


async def test_privacy_mode_delivers_only_what_is_meant_for_the_bot(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    telegram_sim.privacy_mode = True
    chatter = await telegram_sim.user_says(-100500, "lunch?")
    command = await telegram_sim.user_says(-100500, "/status@test_bot")
    other = await telegram_sim.user_says(-100500, "/status@other_bot")
    mention = await telegram_sim.user_says(-100500, "@test_bot ping")
    texts = [u.message.text for u in await bot.get_updates(timeout=0) if u.message]
    assert texts == ["/status@test_bot", "@test_bot ping"]
    assert (chatter.event_id, other.event_id) == (None, None)
    assert command.event_id and mention.event_id
    assert len(telegram_sim.messages(-100500)) == 4


# files ------------------------------------------------------------------------------------------
async def test_uploaded_document_can_be_downloaded_again(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    telegram_sim.chat(ALICE.id)
    sent = await bot.send_document(ALICE.id, b"line 1\nline 2", filename="out.txt",
                                   caption="<b>full</b> output", parse_mode="HTML")  # fmt: skip
    assert sent.document is not None and sent.document.file_name == "out.txt"
    assert sent.caption == "full output"
    file = await bot.get_file(sent.document.file_id)
    assert bytes(await file.download_as_bytearray()) == b"line 1\nline 2"
    assert telegram_sim.bot_messages(ALICE.id)[0].text == "full output"


async def test_caption_over_1024_is_too_long(telegram_sim: TelegramSim, bot: Bot) -> None:
    telegram_sim.chat(ALICE.id)
    with pytest.raises(BadRequest, match="Message caption is too long"):
        await bot.send_photo(ALICE.id, b"\x89PNG", caption="x" * 1025)


# edits, deletes, callbacks ---------------------------------------------------------------------
async def test_identical_edit_is_not_modified(telegram_sim: TelegramSim, bot: Bot) -> None:
    telegram_sim.chat(ALICE.id)
    sent = await bot.send_message(ALICE.id, "same", reply_markup=APPROVE)
    with pytest.raises(BadRequest, match="Message is not modified"):
        await bot.edit_message_text("same", ALICE.id, sent.message_id, reply_markup=APPROVE)
    with pytest.raises(BadRequest, match="Message is not modified"):
        await bot.edit_message_reply_markup(ALICE.id, sent.message_id, reply_markup=APPROVE)
    assert telegram_sim.bot_messages(ALICE.id)[0].history == []


async def test_edits_keep_every_earlier_version(telegram_sim: TelegramSim, bot: Bot) -> None:
    telegram_sim.chat(ALICE.id)
    sent = await bot.send_message(ALICE.id, "v1", reply_markup=APPROVE)
    await bot.edit_message_text("v2", ALICE.id, sent.message_id, reply_markup=APPROVE)
    edited = await bot.edit_message_reply_markup(ALICE.id, sent.message_id)
    msg = telegram_sim.bot_messages(ALICE.id)[0]
    assert [v["text"] for v in msg.history] == ["v1", "v2"]
    assert (msg.text, msg.buttons) == ("v2", [])
    assert not isinstance(edited, bool) and edited.edit_date is not None


async def test_deleted_message_cannot_be_edited_or_deleted_again(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    telegram_sim.chat(ALICE.id)
    sent = await bot.send_message(ALICE.id, "bye")
    assert await bot.delete_message(ALICE.id, sent.message_id)
    assert telegram_sim.bot_messages(ALICE.id)[0].deleted
    with pytest.raises(BadRequest, match="Message to delete not found"):
        await bot.delete_message(ALICE.id, sent.message_id)
    with pytest.raises(BadRequest, match="Message to edit not found"):
        await bot.edit_message_text("again", ALICE.id, sent.message_id)


async def test_callback_query_is_answered_only_once(telegram_sim: TelegramSim, bot: Bot) -> None:
    telegram_sim.chat(ALICE.id)
    sent = await bot.send_message(ALICE.id, "pick", reply_markup=APPROVE)
    query_id = await telegram_sim.press_button(telegram_sim.bot_messages(ALICE.id)[0], "approve:1")
    [update] = await bot.get_updates(timeout=0)
    assert update.callback_query is not None
    assert update.callback_query.message is not None
    assert update.callback_query.message.message_id == sent.message_id
    assert await bot.answer_callback_query(query_id, "ok")
    with pytest.raises(BadRequest, match="Query is too old"):
        await bot.answer_callback_query(query_id)


async def test_press_on_a_stale_copy_carries_the_old_message(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    telegram_sim.chat(ALICE.id)
    sent = await bot.send_message(ALICE.id, "v1", reply_markup=APPROVE)
    await bot.edit_message_text("v2", ALICE.id, sent.message_id)
    card = telegram_sim.bot_messages(ALICE.id)[0]
    with pytest.raises(ValueError, match="no live button"):
        await telegram_sim.press_button(card, "approve:1")
    await telegram_sim.press_button(card, "approve:1", seen=card.history[0])
    [update] = await bot.get_updates(timeout=0)
    assert update.callback_query is not None and update.callback_query.message is not None
    assert update.callback_query.message.text == "v1"  # type: ignore[union-attr]


async def test_redelivered_update_comes_again_until_confirmed(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    said = await telegram_sim.user_says(ALICE.id, "once")
    update_id = int(said.event_id or 0)
    await bot.get_updates(timeout=0)
    await bot.get_updates(offset=update_id + 1, timeout=0)
    await telegram_sim.redeliver(update_id)
    again = await bot.get_updates(offset=update_id + 1, timeout=0)
    assert [u.update_id for u in again] == [update_id]
    assert telegram_sim.updates[0].deliveries == 2


async def test_late_callback_answer_is_too_old(telegram_sim: TelegramSim, bot: Bot) -> None:
    telegram_sim.chat(ALICE.id)
    await bot.send_message(ALICE.id, "pick", reply_markup=APPROVE)
    telegram_sim.callback_window = 0.0
    query_id = await telegram_sim.press_button(telegram_sim.bot_messages(ALICE.id)[0], "approve:1")
    with pytest.raises(BadRequest, match="Query is too old"):
        await bot.answer_callback_query(query_id)


async def test_chat_actions_are_recorded_and_checked(telegram_sim: TelegramSim, bot: Bot) -> None:
    telegram_sim.chat(ALICE.id)
    assert await bot.send_chat_action(ALICE.id, "typing")
    with pytest.raises(BadRequest, match="Wrong parameter action"):
        await bot.send_chat_action(ALICE.id, "dancing")
    assert [a for a, _, _ in telegram_sim.chat_actions(ALICE.id)] == ["typing"]


async def test_commands_are_set_and_read_back(telegram_sim: TelegramSim, bot: Bot) -> None:
    assert await bot.set_my_commands([("start", "Start"), ("stop", "Stop the turn")])
    assert [c.command for c in await bot.get_my_commands()] == ["start", "stop"]
    with pytest.raises(BadRequest, match="Bot_command_invalid"):
        await bot.set_my_commands([("Bad-Name", "nope")])
    assert [c["command"] for c in telegram_sim.commands()] == ["start", "stop"]


# faults -----------------------------------------------------------------------------------------
async def test_flood_limit_answers_429_with_retry_after(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    telegram_sim.flood = FloodLimits(per_chat=2, window=10.0, retry_after=0.2)
    telegram_sim.chat(ALICE.id)
    await bot.send_message(ALICE.id, "1")
    await bot.send_message(ALICE.id, "2")
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(ALICE.id, "3")
    assert caught.value.retry_after == pytest.approx(0.2)
    assert [c.status for c in telegram_sim.calls_to("sendMessage")] == [200, 200, 429]


@pytest.mark.parametrize(
    ("error", "raised", "text"),
    [
        (SimError.rate_limit(0.3), RetryAfter, "Flood control exceeded"),
        (SimError.forbidden(), Forbidden, "bot was blocked by the user"),
        (SimError.not_found(), BadRequest, "Chat not found"),
        (SimError.server_error(502), NetworkError, "Bad Gateway"),
        (SimError.platform("Bad Request: not enough rights"), BadRequest, "Not enough rights"),
    ],
)
async def test_injected_fault_reaches_ptb_as_its_exception(
    telegram_sim: TelegramSim, bot: Bot, error: SimError, raised: type[Exception], text: str
) -> None:
    telegram_sim.chat(ALICE.id)
    telegram_sim.fail_next("sendMessage", error)
    with pytest.raises(raised, match=text):
        await bot.send_message(ALICE.id, "x")
    assert (await bot.send_message(ALICE.id, "y")).text == "y"  # only the next call fails


@pytest.mark.parametrize(
    ("chat", "text"),
    [(ALICE.id, "bot was blocked by the user"), (-100500, "kicked from the supergroup chat")],
)
async def test_blocked_bot_is_forbidden_to_send(
    telegram_sim: TelegramSim, bot: Bot, chat: int, text: str
) -> None:
    telegram_sim.block_bot(chat)
    with pytest.raises(Forbidden, match=text):
        await bot.send_message(chat, "hello?")
    with pytest.raises(Forbidden):
        await bot.send_chat_action(chat, "typing")


async def test_drop_connection_resets_the_in_flight_poll(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    poll = asyncio.create_task(bot.get_updates(timeout=20))
    await telegram_sim.wait_for(telegram_sim.in_flight_polls)
    assert await telegram_sim.drop_connection() == 1
    with pytest.raises(NetworkError, match="RemoteProtocolError"):
        await asyncio.wait_for(poll, 5)


async def test_drop_connection_with_no_poll_resets_the_next_one(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    assert await telegram_sim.drop_connection() == 0
    with pytest.raises(NetworkError, match="RemoteProtocolError"):
        await bot.get_updates(timeout=5)
    assert await bot.get_updates(timeout=0) == ()


async def test_ptb_polling_recovers_from_a_dropped_connection(telegram_sim: TelegramSim) -> None:
    async def echo(update: Update, _: Ctx) -> None:
        assert update.message is not None
        await update.message.reply_text(f"echo: {update.message.text}")

    async with running_app(telegram_sim, MessageHandler(filters.TEXT, echo)):
        await telegram_sim.wait_for(telegram_sim.in_flight_polls)
        assert await telegram_sim.drop_connection() == 1
        await telegram_sim.user_says(ALICE.id, "still there?")
        reply = await telegram_sim.wait_for_bot_message(ALICE.id)  # PTB retries after ~1 s
    assert reply.text == "echo: still there?"
    assert [c.status for c in telegram_sim.calls_to("getUpdates")].count(499) == 1


# webhook mode -----------------------------------------------------------------------------------
async def test_webhook_push_carries_secret_and_retries_until_2xx(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    seen: list[tuple[str | None, int]] = []

    async def receive(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append((request.headers.get("X-Telegram-Bot-Api-Secret-Token"), body["update_id"]))
        return web.Response(status=500 if len(seen) == 1 else 200)

    async with receiver(receive) as url:
        assert await bot.set_webhook(url, secret_token="s3cret")
        said = await telegram_sim.user_says(ALICE.id, "via webhook")
        update_id = int(said.event_id or 0)
        await telegram_sim.wait_for(lambda: telegram_sim.is_confirmed(update_id))
        with pytest.raises(Conflict, match="webhook is active"):
            await bot.get_updates(timeout=0)
        assert await bot.delete_webhook()
    assert seen == [("s3cret", update_id), ("s3cret", update_id)]
    assert telegram_sim.webhook_posts == [(update_id, 500), (update_id, 200)]


async def test_webhook_needs_https_unless_loopback(bot: Bot) -> None:
    with pytest.raises(BadRequest, match=r"(?i)an https url must be provided"):
        await bot.set_webhook("http://example.com/hook")


@asynccontextmanager
async def receiver(handler: Any) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/hook", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/hook"
    finally:
        await runner.cleanup()
