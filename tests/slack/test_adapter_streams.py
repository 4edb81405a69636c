"""The Slack adapter's chat streams through the real slack-bolt / slack_sdk (Socket Mode)
against the simulator (adapters/slack/streams.py): ``LiveText`` "replace" starts a stream
in the thread (with the asker as recipient in channels) and appends only what is new, a
text that is not an extension restarts it, "seal" stops it and the next reply chunk
becomes a ``chat.update`` of its message; refusals are :class:`StreamRefused` with nothing
left behind; the agent session's Stop button is a ``stop`` event only while the stream is
live."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from adapters.base import ChatRef, InboundEvent, RateLimited, SentMessage, StreamRefused
from adapters.calls import LiveText, Send, Typing
from adapters.config_reader import TableInvalid
from adapters.slack.adapter import STREAM_LIMIT, SlackAdapter, SlackSettings
from adapters.slack.outbound import chunk_metadata
from adapters.slack.platform import SlackSection
from core.store.sqlite import SqliteStore
from tests.platform_sim.base import SimError, SimMessage
from tests.platform_sim.slack_sim import ALICE, GENERAL, TEAM, SlackSim

STREAM_CALLS = ["chat.startStream", "chat.appendStream", "chat.stopStream"]


class Running:
    """A started adapter and the events it delivered."""

    def __init__(self, adapter: SlackAdapter) -> None:
        self.adapter = adapter
        self.events: asyncio.Queue[InboundEvent] = asyncio.Queue()

    async def sink(self, event: InboundEvent) -> None:
        self.events.put_nowait(event)

    async def next_event(self) -> InboundEvent:
        return await asyncio.wait_for(self.events.get(), 5)

    async def show(self, chat: ChatRef, text: str) -> None:
        await self.adapter.perform(LiveText(chat, text, "replace"))

    async def seal(self, chat: ChatRef) -> None:
        await self.adapter.perform(LiveText(chat, "", "seal"))

    async def reply(self, chat: ChatRef, text: str, key: str = "turn-1:0") -> SentMessage:
        sent = await self.adapter.perform(Send(chat, text, markup=True, key=key))
        assert sent is not None
        return sent


@pytest.fixture
async def slack(slack_sim: SlackSim, store: SqliteStore) -> AsyncIterator[Running]:
    settings = SlackSettings(api_base_url=slack_sim.api_url, app_token=slack_sim.app_token)
    running = Running(SlackAdapter(slack_sim.bot_token, store, settings))
    await running.adapter.start(running.sink)
    await asyncio.wait_for(running.adapter.health_cell.wait_for(lambda h: h.value.state == "up"), 5)
    try:
        yield running
    finally:
        await running.adapter.stop()


async def asked(slack: Running, sim: SlackSim, channel: str = GENERAL, text: str = "") -> ChatRef:
    """A user asks the bot (a mention in a channel, a DM thread reply otherwise)."""
    if channel == GENERAL:
        await sim.user_says(GENERAL, text or f"{sim.mention} explain")
    else:
        root = await sim.user_says(channel, "first")
        await slack.next_event()
        await sim.user_says(channel, text or "explain", thread=root.id)
    event = await slack.next_event()
    assert event.chat.thread_id is not None
    return event.chat


def stream_message(sim: SlackSim, chat: ChatRef) -> SimMessage:
    (msg,) = [m for m in sim.bot_messages(chat.chat_id) if not m.deleted]
    return msg


async def test_a_streamed_answer_is_one_message_the_reply_takes_over(
    slack: Running, slack_sim: SlackSim
) -> None:
    chat = await asked(slack, slack_sim)
    for text in ("The answer", "The answer is", "The answer is forty-two."):
        await slack.show(chat, text)
    await slack.show(chat, "The answer is forty-two.")  # the same text: nothing to append
    msg = stream_message(slack_sim, chat)
    assert (msg.text, msg.thread) == ("The answer is forty-two.", chat.thread_id)
    start = slack_sim.calls_to("chat.startStream")[0].params
    assert (start["recipient_user_id"], start["recipient_team_id"]) == (ALICE.id, TEAM)
    assert [c.params["markdown_text"] for c in slack_sim.calls_to("chat.appendStream")] == [
        " is", " forty-two."
    ]  # fmt: skip
    await slack.seal(chat)
    sent = await slack.reply(chat, "The answer is *forty-two*.")
    assert sent == SentMessage(chat, msg.id)
    assert slack_sim.stream_calls(GENERAL) == [*STREAM_CALLS[:2], "chat.appendStream",
                                               "chat.stopStream", "chat.update"]  # fmt: skip
    assert (msg.text, msg.raw["metadata"]) == ("The answer is *forty-two*.",
                                               chunk_metadata("turn-1:0"))  # fmt: skip
    later = await slack.reply(chat, "second chunk", key="turn-1:1")
    assert later.message_id != msg.id
    assert slack_sim.calls_to("chat.postMessage")[-1].params["text"] == "second chunk"


async def test_a_dm_thread_streams_without_recipients(slack: Running, slack_sim: SlackSim) -> None:
    dm = slack_sim.dm_channel(ALICE)
    chat = await asked(slack, slack_sim, dm)
    await slack.show(chat, "hello")
    await slack.seal(chat)
    await slack.reply(chat, "hello!")
    assert slack_sim.stream_calls(dm) == ["chat.startStream", "chat.stopStream", "chat.update"]
    assert stream_message(slack_sim, chat).text == "hello!"


async def test_a_dm_top_level_is_refused_without_a_call(
    slack: Running, slack_sim: SlackSim
) -> None:
    dm = slack_sim.dm_channel(ALICE)
    await slack_sim.user_says(dm, "hi")
    chat = (await slack.next_event()).chat
    assert chat.thread_id is None
    with pytest.raises(StreamRefused, match="thread"):
        await slack.show(chat, "hello")
    await slack.seal(chat)  # nothing to seal: no error
    assert slack_sim.stream_calls(dm) == []


async def test_a_text_that_is_not_an_extension_restarts_the_stream(
    slack: Running, slack_sim: SlackSim
) -> None:
    chat = await asked(slack, slack_sim)
    await slack.show(chat, "Let me look that up")
    first = stream_message(slack_sim, chat)
    await slack.show(chat, "")  # the preamble was reset: nothing shown
    assert first.deleted and not slack.adapter.streams.live(chat)
    await slack.show(chat, "Found it: 42")
    second = stream_message(slack_sim, chat)
    assert second.id != first.id and second.text == "Found it: 42"
    await slack.show(chat, "Found it: [redacted]")  # the redactor changed what was shown
    third = stream_message(slack_sim, chat)
    assert third.id != second.id and third.text == "Found it: [redacted]"
    assert slack_sim.stream_calls(GENERAL) == [
        "chat.startStream", "chat.stopStream", "chat.delete",
        "chat.startStream", "chat.stopStream", "chat.delete", "chat.startStream",
    ]  # fmt: skip


async def test_a_refused_stream_is_stream_refused_and_leaves_nothing(
    slack: Running, slack_sim: SlackSim
) -> None:
    chat = await asked(slack, slack_sim)
    slack_sim.refuse_streams[GENERAL] = "streaming_not_enabled"
    with pytest.raises(StreamRefused, match="streaming_not_enabled"):
        await slack.show(chat, "hello")
    del slack_sim.refuse_streams[GENERAL]
    slack_sim.fail_next("chat.appendStream", SimError.platform("not_in_channel"))
    await slack.show(chat, "hello")
    with pytest.raises(StreamRefused, match="not_in_channel"):
        await slack.show(chat, "hello world")
    assert [m for m in slack_sim.bot_messages(GENERAL) if not m.deleted] == []
    assert not slack.adapter.streams.live(chat)


async def test_missing_recipients_are_refused(slack: Running, slack_sim: SlackSim) -> None:
    root = await slack_sim.user_says(GENERAL, "a thread nobody asked the bot in")
    chat = ChatRef("slack", GENERAL, root.id)
    with pytest.raises(StreamRefused, match="missing_recipient_user_id"):
        await slack.show(chat, "hello")


async def test_a_slack_connect_user_refused_at_stop_gets_the_reply_posted(
    slack: Running, slack_sim: SlackSim
) -> None:
    slack_sim.connect_users.add(ALICE.id)
    chat = await asked(slack, slack_sim)
    await slack.show(chat, "hello")
    with pytest.raises(StreamRefused, match="user_not_found"):
        await slack.seal(chat)
    sent = await slack.reply(chat, "hello!")
    assert stream_message(slack_sim, chat).id == sent.message_id  # the stream's was deleted
    assert slack_sim.stream_calls(GENERAL)[-3:] == ["chat.stopStream", "chat.delete",
                                                    "chat.postMessage"]  # fmt: skip


async def test_a_rate_limited_append_is_retried_with_the_whole_suffix(
    slack: Running, slack_sim: SlackSim
) -> None:
    chat = await asked(slack, slack_sim)
    await slack.show(chat, "one")
    slack_sim.fail_next("chat.appendStream", SimError.rate_limit(1))
    with pytest.raises(RateLimited):
        await slack.show(chat, "one two")
    await slack.show(chat, "one two three")
    assert stream_message(slack_sim, chat).text == "one two three"


async def test_a_keyless_send_after_seal_is_posted_and_the_next_turn_forgets(
    slack: Running, slack_sim: SlackSim
) -> None:
    chat = await asked(slack, slack_sim)
    await slack.show(chat, "partial")
    await slack.seal(chat)
    notice = await slack.adapter.perform(Send(chat, "⏹ Stopped.", markup=False))
    stream = [m for m in slack_sim.bot_messages(GENERAL) if m.text == "partial"]
    assert notice is not None and len(stream) == 1 and notice.message_id != stream[0].id
    await slack.seal(chat)  # the next turn streamed nothing
    sent = await slack.reply(chat, "a fresh answer", key="turn-2:0")
    assert sent.message_id not in (stream[0].id, notice.message_id)
    assert stream[0].text == "partial"


async def test_the_stop_button_on_a_live_stream_is_a_stop_event(
    slack: Running, slack_sim: SlackSim
) -> None:
    chat = await asked(slack, slack_sim)
    await slack.show(chat, "thinking out loud")
    ts = stream_message(slack_sim, chat).id
    await slack_sim.stop_agent_session(GENERAL, str(chat.thread_id))
    event = await slack.next_event()
    assert (event.kind, event.stream_id, event.chat, event.sender.id) == (
        "stop", ts, chat, ALICE.id
    )  # fmt: skip
    await slack.show(chat, "thinking out loud, more")  # dropped: Slack ended the stream
    await slack.show(chat, "")  # the stopped turn clears its stream: Slack keeps the text
    assert slack_sim.stream_calls(GENERAL) == ["chat.startStream"]
    assert stream_message(slack_sim, chat).text == "thinking out loud"
    await slack.show(chat, "the next turn")
    assert slack_sim.stream_calls(GENERAL) == ["chat.startStream", "chat.startStream"]


async def test_a_stop_for_an_ended_stream_changes_nothing(
    slack: Running, slack_sim: SlackSim
) -> None:
    chat = await asked(slack, slack_sim)
    await slack.show(chat, "done")
    await slack.seal(chat)
    await slack.reply(chat, "done.")
    await slack_sim.stop_agent_session(GENERAL, str(chat.thread_id))
    other = await asked(slack, slack_sim, text=f"{slack_sim.mention} next")  # a later event
    assert other.thread_id != chat.thread_id  # the stop delivered nothing before it
    assert slack.events.empty()


async def test_the_thread_status_gives_way_to_the_stream_and_comes_back_for_a_tool(
    slack: Running, slack_sim: SlackSim
) -> None:
    chat = await asked(slack, slack_sim)
    thread = (GENERAL, str(chat.thread_id))
    await slack.adapter.perform(Typing(chat))
    assert slack_sim.statuses[thread] == "is thinking…"
    await slack.show(chat, "Let me check")
    assert slack_sim.statuses[thread] == ""  # the stream's message clears it, as a post does
    await slack.adapter.perform(Typing(chat))  # a tool runs: the turn refreshes its status
    assert slack_sim.statuses[thread] == "is thinking…"
    await slack.show(chat, "Let me check that")
    assert slack_sim.stream_calls(GENERAL)[-1] == "chat.appendStream"


async def test_a_stream_still_live_at_shutdown_is_removed(
    slack: Running, slack_sim: SlackSim
) -> None:
    chat = await asked(slack, slack_sim)
    await slack.show(chat, "half an answer")
    await slack.adapter.stop()
    assert [m for m in slack_sim.bot_messages(GENERAL) if not m.deleted] == []
    assert slack_sim.stream_calls(GENERAL) == ["chat.startStream", "chat.stopStream",
                                               "chat.delete"]  # fmt: skip


def test_capabilities_follow_the_streaming_setting(store: SqliteStore) -> None:
    native = SlackAdapter("xoxb-x", store).capabilities
    assert (native.streaming, native.stream_interval, native.stream_keepalive) == (
        "native", 1.0, None
    )  # fmt: skip
    assert not native.stream_progress and not native.live_text
    assert native.bot_limit == STREAM_LIMIT and native.charges.bot == {"live"}
    edit = SlackAdapter("xoxb-x", store, SlackSettings(streaming="edit")).capabilities
    assert (edit.streaming, edit.bot_limit) == ("edit", None)


def test_the_streaming_key_takes_three_values() -> None:
    assert SlackSection.read({"streaming": "off"}).streaming == "off"
    assert SlackSection.read({}).streaming == "native"
    with pytest.raises(TableInvalid, match='expected one of "native", "edit", "off"'):
        SlackSection.read({"streaming": "live"})


async def test_a_taken_over_chunk_in_flight_at_a_crash_is_found_not_posted_again(
    slack: Running, slack_sim: SlackSim
) -> None:
    chat = await asked(slack, slack_sim)
    await slack.show(chat, "an answer")
    await slack.seal(chat)
    since = time.time()
    taken = await slack.reply(chat, "an *answer*", key="turn-9:0")
    again = await slack.adapter.perform(
        Send(chat, "an *answer*", markup=True, key="turn-9:0", in_flight_since=since)
    )  # the next run sends the chunk it found in flight
    assert again == taken
    assert slack_sim.calls_to("chat.postMessage") == []
