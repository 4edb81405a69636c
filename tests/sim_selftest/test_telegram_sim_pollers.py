"""The Telegram simulator's record of pollers (``sim.polls``): what the several-process
tests (tests/cluster/) assert to show that exactly one process polls a bot at a time."""

from __future__ import annotations

import asyncio
import contextlib
from http import HTTPStatus

import pytest
from telegram import Bot
from telegram.error import Conflict

from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.polling import until
from tests.support.ptb import sim_bot


def make_bot(sim: TelegramSim) -> Bot:
    return sim_bot(sim)


async def test_one_poller_polling_again_and_again_overlaps_nothing(
    telegram_sim: TelegramSim,
) -> None:
    async with make_bot(telegram_sim) as bot:
        await telegram_sim.user_says(ALICE.id, "hi")
        [update] = await bot.get_updates(timeout=1)
        assert await bot.get_updates(offset=update.update_id + 1, timeout=0) == ()
    assert [record.status for record in telegram_sim.polls] == [HTTPStatus.OK, HTTPStatus.OK]
    assert all(record.ended is not None for record in telegram_sim.polls)
    assert telegram_sim.overlapping_polls() == []
    assert telegram_sim.poll_conflicts() == []


async def test_a_second_poller_is_recorded_as_an_overlap_and_the_first_gets_409(
    telegram_sim: TelegramSim,
) -> None:
    async with make_bot(telegram_sim) as first, make_bot(telegram_sim) as second:
        waiting = asyncio.create_task(first.get_updates(timeout=20))
        await telegram_sim.wait_for(telegram_sim.in_flight_polls)
        await second.get_updates(timeout=0)
        with pytest.raises(Conflict, match="terminated by other getUpdates request"):
            await asyncio.wait_for(waiting, 5)
    [(early, late)] = telegram_sim.overlapping_polls()
    assert early.peer != late.peer
    assert telegram_sim.poll_conflicts() == [early]
    assert late.status == HTTPStatus.OK


async def test_a_poll_whose_client_went_away_is_no_conflict(
    telegram_sim: TelegramSim,
) -> None:
    async with make_bot(telegram_sim) as gone, make_bot(telegram_sim) as taker:
        waiting = asyncio.create_task(gone.get_updates(timeout=20))
        await telegram_sim.wait_for(telegram_sim.in_flight_polls)
        waiting.cancel()  # the client closes its connection, as a killed process's does
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        await until(lambda: telegram_sim.polls_without_client() == 1, 5)
        await taker.get_updates(timeout=0)
        await telegram_sim.wait_for(lambda: telegram_sim.in_flight_polls() == 0)
    abandoned, taken = telegram_sim.polls
    assert abandoned.abandoned and abandoned.status == HTTPStatus.CONFLICT  # to nobody
    assert taken.status == HTTPStatus.OK
    assert telegram_sim.overlapping_polls() == []
    assert telegram_sim.poll_conflicts() == []
