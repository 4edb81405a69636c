"""The receipt an inbound event carries (adapters/base.py)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from adapters.base import InboundEvent, Receipt
from tests.gateway.fakes import Person, event


def test_an_event_brings_its_own_receipt_outside_its_value() -> None:
    one = event(Person("1", "Alice"), "hi")
    fresh = InboundEvent(
        one.kind, one.platform, one.update_id, one.chat, one.chat_type, one.sender,
        one.session_key, text=one.text,
    )  # fmt: skip
    assert fresh == one and fresh.receipt is not one.receipt
    assert replace(one, args="x").receipt is one.receipt
    assert "receipt" not in repr(one)


async def test_a_receipt_no_one_follows_is_settled_true_as_the_sink_returns() -> None:
    receipt = Receipt()
    receipt.sink_returned()
    assert await receipt.wait() is True


async def test_a_followed_receipt_waits_for_its_outcome_and_the_first_settlement_wins() -> None:
    receipt = Receipt()
    outcome: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    receipt.follow(outcome)
    receipt.sink_returned()
    assert not receipt.settled
    outcome.set_result(False)
    assert await asyncio.wait_for(receipt.wait(), 5) is False
    receipt.settle(True)
    assert await receipt.wait() is False


async def test_a_cancelled_outcome_leaves_the_item_unhandled() -> None:
    receipt = Receipt()
    outcome: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    receipt.follow(outcome)
    outcome.cancel()
    assert await asyncio.wait_for(receipt.wait(), 5) is False


async def test_a_handed_over_receipt_is_settled_false_and_says_so() -> None:
    receipt = Receipt()
    assert not receipt.handed_over
    receipt.hand_over()
    receipt.sink_returned()
    assert await receipt.wait() is False
    assert receipt.handed_over


async def test_a_receipt_settled_before_hand_over_is_not_handed_over() -> None:
    receipt = Receipt()
    receipt.settle(True)
    receipt.hand_over()
    assert await receipt.wait() is True
    assert not receipt.handed_over
