"""Status reactions on Telegram (``setMessageReaction``) against the simulator: the event
names the user's message, the bot's one reaction is replaced, ✅/❌ (not on Telegram's
list) are shown as 👍/👎, and an emoji Telegram refuses arrives as our error tree."""

from __future__ import annotations

import pytest

from adapters.base import AdapterError, ChatRef, SentMessage
from adapters.calls import DONE, FAILED, WORKING, React
from adapters.telegram import TelegramAdapter
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.telegram.harness import EventLog

DM = ChatRef("telegram", str(ALICE.id))


async def test_the_event_names_the_users_message_and_reactions_replace_the_bots_one(
    adapter: TelegramAdapter, telegram_sim: TelegramSim, events: EventLog
) -> None:
    said = await telegram_sim.user_says(ALICE.id, "hello")
    event = await events.next_event()
    assert event.source == SentMessage(DM, said.id)
    for emoji in (WORKING, DONE, FAILED):
        await adapter.perform(React(event.source, emoji))
    stored = telegram_sim.find_message(ALICE.id, int(said.id))
    assert stored is not None and stored.raw["bot_reactions"] == ["👀", "👍", "👎"]
    calls = telegram_sim.calls_to("setMessageReaction")
    assert calls[0].params["reaction"] == [{"type": "emoji", "emoji": "👀"}]


async def test_an_emoji_telegram_refuses_is_an_adapter_error_naming_it(
    adapter: TelegramAdapter, telegram_sim: TelegramSim
) -> None:
    said = await telegram_sim.user_says(ALICE.id, "hello")
    with pytest.raises(AdapterError, match=r"(?i)reaction_invalid"):
        await adapter.perform(React(SentMessage(DM, said.id), "🦆"))
    with pytest.raises(AdapterError, match="not found"):
        await adapter.perform(React(SentMessage(DM, "99999"), WORKING))
