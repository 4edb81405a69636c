"""Approval cards survive a restart as dead cards: stored where shown, retired on start.

Also the cards' rate-limit rule (the same as replies): waits up to ``MAX_RETRY_AFTER``
are honoured, attempts are bounded, and giving up is logged naming the chat.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.base import AdapterError, ChatRef, RateLimited, SentMessage
from core.approver import ApprovalRequest
from core.store.base import ApprovalCard, ApprovalRecord
from core.store.sqlite import SqliteStore, open_store
from gateway.outbound.delivery import MAX_RETRY_AFTER
from gateway.outbound.directory import ChatDirectory
from gateway.outbound.rate_limits import MAX_ATTEMPTS
from gateway.turns.approvals import RESTART_NOTICE, ChatApprover
from tests.gateway.fakes import FakeAdapter, FakeClock, ScriptedModel, Step, event
from tests.gateway.harness import ALICE, GatewayFactory, build_gateway

DANGER = Step(None, tools=(("danger", {"command": "rm -rf build"}),))
KEY = "fake:dm:100"
RESTARTED_ANSWER = "Cancelled: the gateway restarted before this was answered."
CHAT = ChatRef("fake", "100")


async def left_pending(path: Path, card: ApprovalCard | None, approval_id: str = "old-1") -> None:
    """What a crashed run leaves: a running turn, a pending approval, its card's location."""
    store = await open_store(path)
    try:
        session = await store.create_session(KEY, "default")
        await store.start_turn(session.id, "t-old")
        record = ApprovalRecord(approval_id, session.id, KEY, "t-old", "danger", "{}", "?", 1.0)
        await store.create_approval(record)
        if card is not None:
            await store.set_approval_card(
                approval_id, card.platform, card.chat_id, card.thread_id, card.message_id
            )
    finally:
        await store.close()


async def test_a_shown_card_has_its_location_stored(running: GatewayFactory) -> None:
    async with running(DANGER, Step("done")) as gw:
        await gw.say(ALICE, "clean up")
        card = await gw.card()
        (request,) = gw.service.approvals.pending()
        await gw.press(ALICE, f"ap:{request.id}:d", card)
        await gw.settled(card)  # settled after present() ended, the location stored
        stored = await gw.store.get_approval(request.id)
        assert card.message is not None and stored is not None
        assert stored.card == ApprovalCard("fake", "100", None, card.message.message_id)


async def test_a_restart_retires_the_card_a_crashed_run_left_live(
    tmp_path: Path, running: GatewayFactory
) -> None:
    async with running(DANGER, Step("done")) as first_run:
        await first_run.say(ALICE, "clean up")
        card = await first_run.card()
        (request,) = first_run.service.approvals.pending()
        # The first process "dies" here: a second one starts on the same file meanwhile.
        second_run = await build_gateway(tmp_path, ScriptedModel())
        try:
            [retired] = second_run.adapter.of("edit")
            assert retired.message == card.message
            assert retired.text.endswith(RESTART_NOTICE) and retired.buttons == ()
            stored = await second_run.store.get_approval(request.id)
            assert stored is not None and stored.state == "cancelled"
            pressed = await second_run.press(ALICE, f"ap:{request.id}:a", card)
            assert pressed.text == RESTARTED_ANSWER
        finally:
            await second_run.service.stop()
            await second_run.store.close()


async def test_start_retires_a_stored_card_in_its_thread(
    tmp_path: Path, running: GatewayFactory
) -> None:
    await left_pending(tmp_path / "gateway.db", ApprovalCard("fake", "100", "7", "42"))
    async with running() as gw:
        [retired] = gw.adapter.of("edit")
        assert retired.message == SentMessage(ChatRef("fake", "100", "7"), "42")
        assert retired.text == f"danger · id old-1\n\n{RESTART_NOTICE}"
        assert gw.adapter.sink is not None  # the adapter was started before the edit
        pressed = await gw.press(ALICE, "ap:old-1:a", retired)
        assert pressed.text == RESTARTED_ANSWER


async def test_a_card_that_cannot_be_edited_does_not_stop_the_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await left_pending(tmp_path / "gateway.db", ApprovalCard("fake", "100", None, "42"))
    adapter = FakeAdapter()
    adapter.fail("edit", AdapterError("message to edit not found"))
    gw = await build_gateway(tmp_path, ScriptedModel(Step("hello")), adapter=adapter)
    try:
        assert "approval old-1: stale card not retired" in caplog.text
        await gw.say(ALICE, "hi")
        await adapter.wait_sent(lambda text: text == "hello")
    finally:
        await gw.service.stop()
        await gw.store.close()


async def test_cards_without_location_or_adapter_are_left_alone(
    tmp_path: Path, running: GatewayFactory
) -> None:
    path = tmp_path / "gateway.db"
    await left_pending(path, None, "no-card")
    await left_pending_on(path, ApprovalCard("gone", "1", None, "2"), "elsewhere")
    async with running() as gw:
        assert gw.adapter.of("edit") == []
        for approval_id in ("no-card", "elsewhere"):
            record = await gw.store.get_approval(approval_id)
            assert record is not None and record.state == "cancelled"


async def left_pending_on(path: Path, card: ApprovalCard, approval_id: str) -> None:
    store = await open_store(path)
    try:
        session = await store.get_active_session(KEY)
        assert session is not None
        record = ApprovalRecord(approval_id, session.id, KEY, "t-old", "danger", "{}", "?", 2.0)
        await store.create_approval(record)
        await store.set_approval_card(
            approval_id, card.platform, card.chat_id, card.thread_id, card.message_id
        )
    finally:
        await store.close()


# rate limits ---------------------------------------------------------------------------


def approver_on(adapter: FakeAdapter, clock: FakeClock, store: SqliteStore) -> ChatApprover:
    directory = ChatDirectory([adapter])
    directory.record(event(ALICE, "hi"))
    return ChatApprover(directory, sleep=clock.sleep, store=store)


def request() -> ApprovalRequest:
    return ApprovalRequest(
        "r1", "approval", KEY, "s1", "t1", "c1", "danger", {}, "?", "1", time.time(), 30.0
    )


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await open_store(tmp_path / "cards.db")
    yield opened
    await opened.close()


async def test_a_card_waits_out_a_short_rate_limit(store: SqliteStore) -> None:
    adapter, clock = FakeAdapter(clock=time.monotonic), FakeClock()
    adapter.fail("send", RateLimited(0.1), RateLimited(0.05))
    await approver_on(adapter, clock, store).present(request())
    first, second, third = (call.at for call in adapter.of("send"))
    assert second - first >= 0.1 and third - second >= 0.05


async def test_a_card_gives_up_on_a_wait_over_the_cap_and_names_the_chat(
    store: SqliteStore, caplog: pytest.LogCaptureFixture
) -> None:
    adapter, clock = FakeAdapter(), FakeClock()
    adapter.fail("send", RateLimited(MAX_RETRY_AFTER + 1))
    with pytest.raises(RateLimited), caplog.at_level(logging.ERROR):
        await approver_on(adapter, clock, store).present(request())
    assert clock.sleeps == [] and len(adapter.of("send")) == 1
    [given_up] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "given up" in given_up.getMessage() and "chat_id='100'" in given_up.getMessage()


async def test_a_card_stops_after_bounded_attempts(
    store: SqliteStore, caplog: pytest.LogCaptureFixture
) -> None:
    adapter, clock = FakeAdapter(), FakeClock()
    adapter.fail("send", *(RateLimited(0.001) for _ in range(MAX_ATTEMPTS + 3)))
    with pytest.raises(RateLimited), caplog.at_level(logging.INFO):
        await approver_on(adapter, clock, store).present(request())
    assert len(adapter.of("send")) == MAX_ATTEMPTS
    waits = [r for r in caplog.records if r.levelno == logging.INFO and "waiting" in r.getMessage()]
    assert len(waits) == MAX_ATTEMPTS - 1 and "chat_id='100'" in waits[0].getMessage()
    assert f"after {MAX_ATTEMPTS} attempt(s)" in caplog.text and str(CHAT.chat_id) in caplog.text


# cancelled while showing ---------------------------------------------------------------


async def test_a_card_cancelled_while_being_sent_loses_its_buttons_once_it_arrives(
    store: SqliteStore,
) -> None:
    adapter, clock, arrives = FakeAdapter(), FakeClock(), asyncio.Event()
    adapter.holds["send"] = arrives
    presenting = asyncio.create_task(approver_on(adapter, clock, store).present(request()))
    await adapter.wait_for(lambda: bool(adapter.of("send")))
    presenting.cancel()  # /stop while the platform is still taking the card
    arrives.set()
    with pytest.raises(asyncio.CancelledError):
        await presenting
    (sent,) = adapter.of("send")
    (withdrawn,) = adapter.of("edit")
    assert sent.buttons and withdrawn.message == sent.message
    assert withdrawn.buttons == () and withdrawn.text.endswith("⏹ Cancelled")
