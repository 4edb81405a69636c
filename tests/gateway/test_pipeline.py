"""Each bot's outbound pipeline (gateway/outbound/pipeline.py): schedule → redact → count →
``adapter.perform(call)``, each call's priority and coalescing carried on the value.

The budget here is one call per chat per hour, on a test clock that skips each wait: the
first send is held, the calls made meanwhile wait behind it, and once it ends they start
one at a time, in the order the scheduler chose (no test waits the hour)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from prometheus_client import CollectorRegistry

from adapters.base import EVERY_CALL, Button, Charges, ChatRef, RateLimit, RateLimited, SentMessage
from adapters.calls import AnswerPress, Delete, Edit, LiveText, Priority, Send, Typing
from core.redaction import MASK, remember_secrets
from gateway.outbound.delivery import Delivery
from gateway.outbound.pipeline import Latest, Outbound
from gateway.web.metrics import GatewayMetrics
from tests.gateway.fakes import TELEGRAMISH, WAIT, FakeAdapter, Person, event
from tests.support.clock import TestClock

CHAT = ChatRef("fake", "100")
SECRET = "pipeline-secret-7f3a9c"
ALICE = Person("1", "Alice")


def paced_bot() -> tuple[FakeAdapter, Outbound, asyncio.Event]:
    """A bot whose chats take one call of any kind an hour, on a clock that skips the
    wait; its sends wait until the returned event is set (the first one holds the chat)."""
    caps = replace(
        TELEGRAMISH, chat_limit=RateLimit(1, 3600.0), charges=Charges(chat=EVERY_CALL),
        pace_clock=TestClock(),
    )  # fmt: skip
    adapter = FakeAdapter(capabilities=caps)
    release = adapter.holds["send"] = asyncio.Event()
    return adapter, Outbound.paced(adapter), release


async def holding_the_chat(adapter: FakeAdapter, bot: Outbound) -> asyncio.Future[object]:
    first = asyncio.ensure_future(bot.perform(Send(CHAT, "first")))
    await adapter.wait_for(lambda: bool(adapter.of("send")))
    return first


async def test_every_text_and_button_label_is_redacted_before_the_adapter_sees_it() -> None:
    remember_secrets([SECRET])
    adapter = FakeAdapter(capabilities=replace(TELEGRAMISH, live_text=True))
    bot = Outbound.paced(adapter)
    sent = await bot.perform(
        Send(CHAT, f"key {SECRET}", [[Button(f"use {SECRET}", "ch:x:0")]], markup=False)
    )
    await bot.perform(Edit(sent, f"now {SECRET}"))
    await bot.perform(AnswerPress(event(ALICE, button="ch:x:0", on=sent), f"no {SECRET}"))
    await bot.perform(LiveText(CHAT, f"live {SECRET}", "append"))
    texts = [c.text for c in adapter.calls] + [adapter.calls[0].buttons[0][0].label]
    assert texts == [f"key {MASK}", f"now {MASK}", f"no {MASK}", f"live {MASK}", f"use {MASK}"]


async def test_a_delete_returns_at_once_and_runs_when_the_budget_allows() -> None:
    adapter, bot, release = paced_bot()
    first = await holding_the_chat(adapter, bot)
    assert await bot.perform(Delete(SentMessage(CHAT, "9"))) is None  # queued, not awaited
    assert adapter.of("delete") == []
    release.set()
    await first
    await adapter.wait_for(lambda: bool(adapter.of("delete")))
    await bot.aclose()


async def test_waiting_calls_start_by_the_priority_each_value_carries() -> None:
    adapter, bot, release = paced_bot()
    first = await holding_the_chat(adapter, bot)
    press = event(ALICE, button="ch:x:0", on=SentMessage(CHAT, "1"))
    waiting = [
        asyncio.ensure_future(bot.perform(call))
        for call in (
            Typing(CHAT),
            Send(CHAT, "progress", priority=Priority.PROGRESS),
            Send(CHAT, "reply"),
            AnswerPress(press, "noted"),
        )
    ]
    release.set()
    await asyncio.wait_for(asyncio.gather(first, *waiting), WAIT)
    made = [(c.method, c.text) for c in adapter.calls]
    assert made == [
        ("send", "first"), ("answer", "noted"), ("send", "reply"), ("send", "progress"),
        ("typing", ""),
    ]  # fmt: skip
    await bot.aclose()


async def test_typing_waiting_in_a_chat_is_one_call_however_often_it_is_asked() -> None:
    adapter, bot, release = paced_bot()
    first = await holding_the_chat(adapter, bot)
    typing = [asyncio.ensure_future(bot.perform(Typing(CHAT))) for _ in range(5)]
    release.set()
    await asyncio.wait_for(asyncio.gather(first, *typing), WAIT)
    assert len(adapter.of("typing")) == 1
    await bot.aclose()


async def test_a_latest_call_sends_the_state_that_is_newest_when_it_starts() -> None:
    adapter, bot, release = paced_bot()
    first = await holding_the_chat(adapter, bot)
    state = ["step 1"]
    asked = Send(CHAT, state[0], priority=Priority.PROGRESS)
    progress = asyncio.ensure_future(
        bot.perform(Latest(asked, lambda: replace(asked, text=state[-1])))
    )
    state.append("step 2")  # while the progress write waits for the budget
    release.set()
    await asyncio.wait_for(asyncio.gather(first, progress), WAIT)
    assert adapter.texts() == ["first", "step 2"]
    await bot.aclose()


async def test_the_traffic_counter_counts_each_attempt_and_each_inbound_event() -> None:
    metrics = GatewayMetrics()
    adapter = FakeAdapter()
    adapter.fail("send", RateLimited(0.0))
    bot = Outbound.paced(adapter, metrics.traffic)
    await bot.perform(Send(CHAT, "through"))
    bot.received(event(ALICE, "hello"))
    assert [c.text for c in adapter.of("send")] == ["through", "through"]
    assert sample(metrics.registry, "commonos_platform_rate_limited_total") == 1.0
    assert sample(metrics.registry, "commonos_outbound_messages_total") == 1.0
    assert sample(metrics.registry, "commonos_inbound_messages_total") == 1.0
    await bot.aclose()


def sample(registry: CollectorRegistry, name: str) -> float | None:
    return registry.get_sample_value(name, {"platform": "fake"})


async def test_a_stored_reply_chunk_reaches_the_adapter_with_its_outbox_id_as_key() -> None:
    adapter = FakeAdapter()
    bot = Outbound.paced(adapter)
    await Delivery().reply(bot, CHAT, "the answer", turn_id="turn-7")
    await Delivery().notice(bot, CHAT, "⏹ Stopped.")
    assert [(c.text, c.key) for c in adapter.of("send")] == [
        ("the answer", "turn-7.0"), ("⏹ Stopped.", None),
    ]  # fmt: skip
    await bot.aclose()
