"""Sending replies: fallbacks, bounded retries, loud failures, and the typing indicator."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import pytest

from adapters.base import ChatRef, Forbidden, RateLimited
from adapters.render.markdown import PLAIN
from gateway.outbound.delivery import MAX_CHUNKS, Delivery, Typing
from gateway.outbound.pipeline import Outbound
from tests.gateway.fakes import TELEGRAMISH, FakeAdapter, FakeClock

CHAT = ChatRef("fake", "100")


async def test_a_lost_chunk_is_logged_and_the_next_chunk_still_goes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter, clock = FakeAdapter(), FakeClock()
    adapter.fail("send", Forbidden("bot was blocked"))
    reply = "\n\n".join(["word " * 900, "tail"])
    with caplog.at_level(logging.ERROR, logger="gateway.outbound.delivery"):
        sent = await Delivery(sleep=clock.sleep).reply(Outbound(adapter), CHAT, reply)
    assert len(adapter.of("send")) == 2 and len(sent) == 1
    assert adapter.texts()[1].endswith("tail")
    assert any("lost" in r.getMessage() for r in caplog.records)


async def test_rate_limits_are_retried_a_bounded_number_of_times(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter, clock = FakeAdapter(), FakeClock()
    adapter.fail("send", *[RateLimited(2.0) for _ in range(10)])
    with caplog.at_level(logging.ERROR, logger="gateway.outbound.delivery"):
        sent = await Delivery(sleep=clock.sleep, attempts=3).notice(Outbound(adapter), CHAT, "hi")
    assert sent is None and len(adapter.of("send")) == 3 and clock.sleeps == [2.0] * 2
    assert any("lost" in r.getMessage() for r in caplog.records)


async def test_a_flood_wait_over_a_minute_is_logged_as_lost_not_waited_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter, clock = FakeAdapter(), FakeClock()
    adapter.fail("send", RateLimited(3600.0))
    with caplog.at_level(logging.ERROR, logger="gateway.outbound.delivery"):
        sent = await Delivery(sleep=clock.sleep).notice(Outbound(adapter), CHAT, "hi")
    assert sent is None and clock.sleeps == [] and adapter.texts() == ["hi"]
    assert any("fake" in r.getMessage() and "lost" in r.getMessage() for r in caplog.records)


async def test_a_reply_retries_through_a_long_flood_of_short_waits() -> None:
    adapter, clock = FakeAdapter(), FakeClock()
    adapter.fail("send", *[RateLimited(30.0) for _ in range(7)])
    sent = await Delivery(sleep=clock.sleep).reply(Outbound(adapter), CHAT, "finally")
    assert len(sent) == 1 and clock.sleeps == [30.0] * 7 and adapter.texts()[-1] == "finally"


async def test_a_huge_reply_is_capped_with_a_truncation_note() -> None:
    adapter = FakeAdapter()
    paragraph = "word " * 700
    await Delivery().reply(Outbound(adapter), CHAT, "\n\n".join([paragraph] * 30))
    texts = adapter.texts()
    assert len(texts) == MAX_CHUNKS
    assert texts[-1].startswith("… (reply truncated: ") and texts[-1].endswith("more characters)")
    shown = sum(t.count("word") for t in texts[:-1])
    left_out = int(texts[-1].split(": ")[1].split()[0])
    assert shown + left_out // len("word ") >= 700 * 30 - 30


async def test_plain_platform_gets_markup_stripped_and_markup_off() -> None:
    adapter = FakeAdapter(capabilities=replace(TELEGRAMISH, markup="plain", renderer=PLAIN))
    await Delivery().reply(Outbound(adapter), CHAT, "**hello** `x`")
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

    async with Typing(Outbound(adapter), CHAT, interval=4.0, sleep=sleep) as typing:
        await asyncio.wait_for(stuck.wait(), 5)
        assert len(adapter.of("typing")) == 3
    assert typing._task is None
    assert len(adapter.of("typing")) == 3


async def test_a_lost_message_is_logged_by_chat_and_length_never_by_content(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter, clock = FakeAdapter(), FakeClock()
    adapter.fail("send", Forbidden("bot was blocked"))
    with caplog.at_level(logging.ERROR, logger="gateway.outbound.delivery"):
        await Delivery(sleep=clock.sleep).notice(Outbound(adapter), CHAT, "my password is hunter2")
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "hunter2" not in logged and "password" not in logged
    assert "fake" in logged and "22 characters" in logged
