"""Sending replies: fallbacks, bounded retries, loud failures, and the typing indicator."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import pytest

from adapters.base import ChatRef, Forbidden, RateLimited
from gateway.delivery import Delivery, Typing
from tests.gateway.fakes import TELEGRAMISH, FakeAdapter, FakeClock

CHAT = ChatRef("fake", "100")


async def test_a_lost_chunk_is_logged_and_the_next_chunk_still_goes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter, clock = FakeAdapter(), FakeClock()
    adapter.fail("send", Forbidden("bot was blocked"))
    reply = "\n\n".join(["word " * 900, "tail"])
    with caplog.at_level(logging.ERROR, logger="gateway.delivery"):
        sent = await Delivery(sleep=clock.sleep).reply(adapter, CHAT, reply)
    assert len(adapter.of("send")) == 2 and len(sent) == 1
    assert adapter.texts()[1].endswith("tail")
    assert any("lost" in r.getMessage() for r in caplog.records)


async def test_rate_limits_are_retried_a_bounded_number_of_times(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter, clock = FakeAdapter(), FakeClock()
    adapter.fail("send", *[RateLimited(2.0) for _ in range(10)])
    with caplog.at_level(logging.ERROR, logger="gateway.delivery"):
        sent = await Delivery(sleep=clock.sleep, attempts=3).notice(adapter, CHAT, "hi")
    assert sent is None and len(adapter.of("send")) == 3 and clock.sleeps == [2.0] * 3
    assert any("still rate limited" in r.getMessage() for r in caplog.records)


async def test_retry_after_is_capped() -> None:
    adapter, clock = FakeAdapter(), FakeClock()
    adapter.fail("send", RateLimited(3600.0))
    await Delivery(sleep=clock.sleep).notice(adapter, CHAT, "hi")
    assert clock.sleeps == [60.0] and adapter.texts() == ["hi", "hi"]


async def test_plain_platform_gets_markup_stripped_and_markup_off() -> None:
    adapter = FakeAdapter(capabilities=replace(TELEGRAMISH, markup="plain"))
    await Delivery().reply(adapter, CHAT, "**hello** `x`")
    assert [(c.text, c.markup) for c in adapter.of("send")] == [("hello x", False)]


async def test_typing_is_refreshed_while_running_and_stops_with_the_turn() -> None:
    adapter = FakeAdapter()
    ticks = asyncio.Semaphore(2)  # two refreshes go through, then time stands still
    stuck = asyncio.Event()

    async def sleep(seconds: float) -> None:
        if ticks.locked():
            stuck.set()
            await asyncio.Event().wait()
        await ticks.acquire()

    async with Typing(adapter, CHAT, interval=4.0, sleep=sleep) as typing:
        await asyncio.wait_for(stuck.wait(), 5)
        assert len(adapter.of("typing")) == 3
    assert typing._task is None
    assert len(adapter.of("typing")) == 3
