"""Contract tests of the simulator's drafts: the real python-telegram-bot's
``send_message_draft`` (with Bot API 10.3's ``can_stop``/``keep_on_stop`` as ``api_kwargs``)
and the ``stopped_message_generation`` update (read from ``Update.api_kwargs``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from telegram import Bot
from telegram.error import BadRequest, RetryAfter

from adapters.telegram.errors import retry_after_seconds
from tests.platform_sim.telegram_drafts import DRAFT_LIFETIME, STOP_UPDATE
from tests.platform_sim.telegram_sim import ALICE, FloodLimits, TelegramSim, TgChat
from tests.support.ptb import sim_bot

STOPPABLE = {"can_stop": True, "keep_on_stop": False}


@pytest.fixture
async def bot(telegram_sim: TelegramSim) -> AsyncIterator[Bot]:
    async with sim_bot(telegram_sim) as b:
        yield b


async def test_drafts_are_kept_per_chat_with_their_versions_and_times(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    sim, now = telegram_sim, [100.0]
    sim.clock = lambda: now[0]
    sim.chat(ALICE.id)
    assert await bot.send_message_draft(ALICE.id, 7, "Hel", api_kwargs=STOPPABLE) is True
    now[0] = 101.0
    await bot.send_message_draft(ALICE.id, 7, "<b>Hello</b>", parse_mode="HTML")
    await bot.send_message_draft(ALICE.id, 8, "", message_thread_id=3)  # "Thinking…"
    first, topic = sim.drafts.of(ALICE.id)
    assert [(v.text, v.can_stop, v.at) for v in first.versions] == [
        ("Hel", True, 100.0), ("Hello", False, 101.0),
    ]  # fmt: skip
    assert first.latest.entities == ({"type": "bold", "offset": 0, "length": 5},)
    assert (topic.thread, topic.draft_id, topic.text) == (3, 8, "")
    assert sim.drafts.live(ALICE.id) is first and sim.drafts.live(ALICE.id, 3) is topic
    assert first.visible(101.0 + DRAFT_LIFETIME - 0.1)
    assert not first.visible(101.0 + DRAFT_LIFETIME)


async def test_groups_and_refusing_chats_answer_textdraft_peer_invalid(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    sim = telegram_sim
    sim.add_group(-100500)
    sim.add_group(-500, supergroup=False)
    sim.chats[-1001] = TgChat(-1001, "channel", "News")
    sim.chat(ALICE.id)
    sim.refuse_drafts(ALICE.id)
    for chat in (-100500, -500, -1001, ALICE.id):
        with pytest.raises(BadRequest, match="Textdraft_peer_invalid"):
            await bot.send_message_draft(chat, 1, "x")
    with pytest.raises(BadRequest, match="non-zero"):
        await bot.send_message_draft(sim.chat(43).id, 0, "x")
    with pytest.raises(BadRequest, match="Message is too long"):
        await bot.send_message_draft(43, 1, "x" * 4097)
    assert sim.drafts.drafts == []


async def test_drafts_count_in_the_chat_flood_limit(telegram_sim: TelegramSim, bot: Bot) -> None:
    sim = telegram_sim
    sim.flood = FloodLimits(per_chat=2, window=1.0, retry_after=3)
    sim.chat(ALICE.id)
    await bot.send_message(ALICE.id, "first")
    await bot.send_message_draft(ALICE.id, 1, "a")
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message_draft(ALICE.id, 1, "ab")
    assert retry_after_seconds(caught.value) == 3.0
    assert [v.text for v in sim.drafts.of(ALICE.id)[0].versions] == ["a"]


async def test_a_real_message_dismisses_the_live_draft_of_its_thread(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    sim = telegram_sim
    sim.chat(ALICE.id)
    await bot.send_message_draft(ALICE.id, 1, "partial")
    await bot.send_message_draft(ALICE.id, 2, "in a topic", message_thread_id=5)
    await bot.send_message(ALICE.id, "the answer")
    assert sim.drafts.live(ALICE.id) is None
    assert [d.state for d in sim.drafts.of(ALICE.id)] == ["dismissed", "live"]


async def test_stop_press_is_delivered_only_when_allowed_updates_asks_for_it(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    sim = telegram_sim
    sim.chat(ALICE.id)
    await bot.send_message_draft(ALICE.id, 9, "thinking", api_kwargs=STOPPABLE)
    await sim.press_stop(ALICE.id)
    assert await bot.get_updates(timeout=0, allowed_updates=["message"]) == ()
    await bot.send_message_draft(ALICE.id, 10, "again", message_thread_id=4, api_kwargs=STOPPABLE)
    pressed = await sim.press_stop(ALICE.id, thread=4)
    (update,) = await bot.get_updates(timeout=0, allowed_updates=["message", STOP_UPDATE])
    assert update.update_id == pressed.update_id
    stopped = update.api_kwargs[STOP_UPDATE]  # not typed by PTB 22.8: kept in api_kwargs
    chat = sim.chat(ALICE.id).to_json()
    assert stopped == {"chat": chat, "message_thread_id": 4, "draft_id": 10}
    assert [d.state for d in sim.drafts.of(ALICE.id)] == ["stopped", "stopped"]
    await bot.send_message_draft(ALICE.id, 10, "more", message_thread_id=4)
    assert sim.drafts.of(ALICE.id)[1].after_stop == 1
    assert sim.drafts.live(ALICE.id, 4) is None


async def test_keep_on_stop_turns_the_draft_into_a_message(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    sim = telegram_sim
    sim.chat(ALICE.id)
    await bot.send_message_draft(
        ALICE.id, 3, "half an answer", api_kwargs={"can_stop": True, "keep_on_stop": True}
    )
    await sim.press_stop(ALICE.id, 3)
    assert sim.drafts.of(ALICE.id)[0].state == "kept"
    assert [m.text for m in sim.bot_messages(ALICE.id)] == ["half an answer"]


async def test_stop_needs_a_visible_draft_with_a_stop_button(
    telegram_sim: TelegramSim, bot: Bot
) -> None:
    sim, now = telegram_sim, [0.0]
    sim.clock = lambda: now[0]
    sim.chat(ALICE.id)
    await bot.send_message_draft(ALICE.id, 1, "no button")
    with pytest.raises(ValueError, match="no Stop button"):
        await sim.press_stop(ALICE.id)
    await bot.send_message_draft(ALICE.id, 2, "expires", api_kwargs=STOPPABLE)
    now[0] = DRAFT_LIFETIME
    with pytest.raises(ValueError, match="shows no draft"):
        await sim.press_stop(ALICE.id, 2)
    late = await sim.stop_update(ALICE.id, 2)  # a press that raced the draft's end
    assert late.payload == {"chat": sim.chat(ALICE.id).to_json(), "draft_id": 2}
