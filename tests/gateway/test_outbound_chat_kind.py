"""The scheduler paces a chat by the kind its newest validated event gave it: a group
budget for groups, channels and threads, none for a DM — and nothing is sticky.

The group budget is one call per hour on a test clock that never moves: a chat still
paced as a group could not make its second call (the control is
``tests/telegram/test_pacing_poisoned_chat_type.py``)."""

from __future__ import annotations

import asyncio

from adapters.base import (
    Capabilities,
    ChatRef,
    ChatType,
    InboundEvent,
    RateLimit,
    Sender,
    SessionKey,
)
from gateway.outbound.scheduler import OutboundScheduler, Priority

CHAT = ChatRef("telegram", "42")
CAPABILITIES = Capabilities(
    max_text_length=4096,
    length_unit="utf16",
    supports_edit=True,
    button_payload_limit=64,
    edit_interval=1.0,
    markup="plain",
    group_limit=RateLimit(1, 3600.0),
)


def event(chat_type: ChatType) -> InboundEvent:
    return InboundEvent(
        kind="text", platform="telegram", update_id="1", chat=CHAT, chat_type=chat_type,
        sender=Sender("42", "Alice"), session_key=SessionKey("telegram", chat_type, "42"),
    )  # fmt: skip


async def three_calls(scheduler: OutboundScheduler) -> None:
    """Three calls to the chat, waited for (as a group the second would wait an hour)."""

    async def call() -> None:
        return None

    calls = [scheduler.run(call, chat=CHAT, priority=Priority.REPLY, what="m") for _ in "abc"]
    await asyncio.wait_for(asyncio.gather(*calls), 5.0)


async def test_a_dm_event_after_a_group_one_paces_the_chat_as_a_dm_again() -> None:
    scheduler = OutboundScheduler(CAPABILITIES, clock=lambda: 0.0)
    scheduler.learn(event("group"))
    scheduler.learn(event("dm"))
    await three_calls(scheduler)
    assert scheduler.stats.calls == 3 and scheduler.waiting == 0
    await scheduler.aclose()
