"""Status reactions on Slack (``reactions.add``) against the simulator through slack-sdk:
the event names the user's message, the reactions go by Slack's names, and one the bot
already put there (``already_reacted``, a replayed turn) is no error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from adapters.base import AdapterError, ChatRef, InboundEvent, SentMessage
from adapters.calls import DONE, FAILED, WORKING, React
from adapters.slack.adapter import SlackAdapter, SlackSettings
from core.store.sqlite import SqliteStore
from tests.platform_sim.slack_sim import ALICE, SlackSim


@pytest.fixture
async def events(slack_sim: SlackSim, store: SqliteStore) -> AsyncIterator[
    tuple[SlackAdapter, asyncio.Queue[InboundEvent]]
]:  # fmt: skip
    settings = SlackSettings(api_base_url=slack_sim.api_url, app_token=slack_sim.app_token)
    adapter = SlackAdapter(slack_sim.bot_token, store, settings)
    got: asyncio.Queue[InboundEvent] = asyncio.Queue()

    async def sink(event: InboundEvent) -> None:
        got.put_nowait(event)

    await adapter.start(sink)
    await asyncio.wait_for(adapter.health_cell.wait_for(lambda h: h.value.state == "up"), 5)
    try:
        yield adapter, got
    finally:
        await adapter.stop()


async def test_reactions_go_by_name_on_the_users_message_and_a_repeat_is_no_error(
    events: tuple[SlackAdapter, asyncio.Queue[InboundEvent]], slack_sim: SlackSim
) -> None:
    adapter, got = events
    dm = slack_sim.dm_channel(ALICE)
    said = await slack_sim.user_says(dm, "hello")
    event = await asyncio.wait_for(got.get(), 5)
    assert event.source == SentMessage(ChatRef("slack", dm), said.id)
    for emoji in (WORKING, WORKING, DONE, FAILED):  # 👀 twice: already_reacted, ignored
        await adapter.perform(React(event.source, emoji))
    names = [r["name"] for r in said.raw["reactions"]]
    assert names == ["eyes", "white_check_mark", "x"]
    assert [c.params["name"] for c in slack_sim.calls_to("reactions.add")][:2] == ["eyes"] * 2


async def test_a_reaction_on_a_missing_message_is_an_adapter_error(
    events: tuple[SlackAdapter, asyncio.Queue[InboundEvent]], slack_sim: SlackSim
) -> None:
    adapter, _ = events
    dm = slack_sim.dm_channel(ALICE)
    with pytest.raises(AdapterError):
        await adapter.perform(React(SentMessage(ChatRef("slack", dm), "1.000999"), WORKING))
