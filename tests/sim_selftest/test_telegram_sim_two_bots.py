"""Contract tests: two bots on one Telegram simulator, through python-telegram-bot's Bot."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from telegram import Bot

from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.ptb import sim_bot

GROUP = -100777
OTHER_TOKEN = "654321:OTHER-TOKEN"


def make_bot(sim: TelegramSim) -> Bot:
    return sim_bot(sim)


@pytest.fixture
async def pair(telegram_sim: TelegramSim) -> AsyncIterator[tuple[Bot, Bot, TelegramSim]]:
    telegram_sim.add_group(GROUP)
    peer = telegram_sim.add_bot(OTHER_TOKEN, "other_bot")
    async with make_bot(telegram_sim) as first, make_bot(peer) as second:
        yield first, second, peer


async def test_each_bot_is_itself_on_one_server(
    telegram_sim: TelegramSim, pair: tuple[Bot, Bot, TelegramSim]
) -> None:
    first, second, peer = pair
    assert peer.url == telegram_sim.url
    assert (await first.get_me()).username == "test_bot"
    assert (await second.get_me()).username == "other_bot"


async def test_a_bots_group_message_reaches_the_other_bot_flagged_as_a_bot(
    telegram_sim: TelegramSim, pair: tuple[Bot, Bot, TelegramSim]
) -> None:
    first, second, peer = pair
    await first.send_message(GROUP, "hello from the first")
    [update] = await second.get_updates(timeout=1)
    assert update.message is not None and update.message.from_user is not None
    assert update.message.from_user.is_bot
    assert update.message.from_user.username == "test_bot"
    assert update.message.text == "hello from the first"
    assert await first.get_updates(timeout=0) == ()  # a bot never gets its own message
    assert [m.text for m in telegram_sim.bot_messages(GROUP, bot=telegram_sim.bot)] == [
        "hello from the first"
    ]
    assert telegram_sim.bot_messages(GROUP, bot=peer.bot) == []


async def test_a_users_group_message_reaches_both_bots_and_a_dm_only_its_bot(
    telegram_sim: TelegramSim, pair: tuple[Bot, Bot, TelegramSim]
) -> None:
    first, second, _peer = pair
    await telegram_sim.user_says(GROUP, "hi all", user=ALICE)
    for bot in (first, second):
        [update] = await bot.get_updates(timeout=1)
        assert update.message is not None and update.message.text == "hi all"
        assert update.message.from_user is not None and not update.message.from_user.is_bot
    await telegram_sim.user_says(ALICE.id, "just you")
    assert len(await first.get_updates(offset=2, timeout=1)) == 1
    assert await second.get_updates(offset=2, timeout=0) == ()


async def test_privacy_mode_hides_the_other_bots_plain_messages() -> None:
    sim = TelegramSim(privacy_mode=True)
    await sim.start()
    try:
        sim.add_group(GROUP)
        peer = sim.add_bot(OTHER_TOKEN, "other_bot")
        async with make_bot(sim) as first, make_bot(peer) as second:
            await first.send_message(GROUP, "plain")
            assert await second.get_updates(timeout=0) == ()
            assert [m.text for m in sim.bot_messages(GROUP)] == ["plain"]
    finally:
        await sim.stop()
    assert sim.errors == []
