"""Contract tests of the Slack simulator's chat streams through the real slack_sdk / bolt:
``chat.startStream`` / ``appendStream`` / ``stopStream``, their errors and limits, and the
agent session's ``agent_session_stopped`` (:mod:`tests.platform_sim.slack_streams`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.platform_sim.slack_sim import ALICE, GENERAL, TEAM, RateLimit, SlackSim, Tier
from tests.sim_selftest.test_slack_sim import socket_mode

RECIPIENT: dict[str, Any] = {"recipient_user_id": ALICE.id, "recipient_team_id": TEAM}


def client(sim: SlackSim, token: str | None = None) -> AsyncWebClient:
    return AsyncWebClient(token=token or sim.bot_token, base_url=sim.api_url)


async def thread(sim: SlackSim, channel: str = GENERAL) -> str:
    return (await sim.user_says(channel, "question")).id


async def error_of(call: Any) -> str:
    with pytest.raises(SlackApiError) as caught:
        await call
    return str(caught.value.response["error"])


async def test_a_stream_is_one_thread_reply_holding_everything_appended(
    slack_sim: SlackSim,
) -> None:
    web, root = client(slack_sim), await thread(slack_sim)
    started = await web.chat_startStream(
        channel=GENERAL, thread_ts=root, markdown_text="Hel", **RECIPIENT
    )
    ts = str(started["ts"])
    await web.chat_appendStream(channel=GENERAL, ts=ts, markdown_text="lo ")
    assert slack_sim.find_message(GENERAL, ts).text == "Hello "  # type: ignore[union-attr]
    stopped = await web.chat_stopStream(channel=GENERAL, ts=ts, markdown_text="world")
    msg = slack_sim.find_message(GENERAL, ts)
    assert msg is not None and (msg.text, msg.thread, msg.from_bot) == ("Hello world", root, True)
    assert stopped["message"]["text"] == "Hello world"
    assert slack_sim.streams[ts].chunks == ["Hel", "lo ", "world"]
    assert slack_sim.stream_calls(GENERAL) == [
        "chat.startStream", "chat.appendStream", "chat.stopStream"
    ]  # fmt: skip
    assert len(slack_sim.bot_messages(GENERAL)) == 1


async def test_update_is_refused_while_streaming_and_works_once_stopped(
    slack_sim: SlackSim,
) -> None:
    web, root = client(slack_sim), await thread(slack_sim)
    ts = str((await web.chat_startStream(channel=GENERAL, thread_ts=root, **RECIPIENT))["ts"])
    assert await error_of(web.chat_update(channel=GENERAL, ts=ts, text="x")) == (
        "cant_update_message"
    )
    await web.chat_appendStream(channel=GENERAL, ts=ts, markdown_text="draft")
    await web.chat_stopStream(channel=GENERAL, ts=ts)
    meta = {"event_type": "commonos_chunk", "event_payload": {"chunk": "k1"}}
    await web.chat_update(channel=GENERAL, ts=ts, text="*final*", metadata=meta)
    msg = slack_sim.find_message(GENERAL, ts)
    assert msg is not None and msg.text == "*final*" and msg.raw["metadata"] == meta
    assert await error_of(web.chat_appendStream(channel=GENERAL, ts=ts, markdown_text="x")) == (
        "message_not_in_streaming_state"
    )
    assert await error_of(web.chat_stopStream(channel=GENERAL, ts=ts)) == (
        "message_not_in_streaming_state"
    )


async def test_channels_need_recipients_dms_do_not(slack_sim: SlackSim) -> None:
    web, root = client(slack_sim), await thread(slack_sim)
    no_user = web.chat_startStream(channel=GENERAL, thread_ts=root, recipient_team_id=TEAM)
    assert await error_of(no_user) == "missing_recipient_user_id"
    no_team = web.chat_startStream(channel=GENERAL, thread_ts=root, recipient_user_id=ALICE.id)
    assert await error_of(no_team) == "missing_recipient_team_id"
    stranger = web.chat_startStream(
        channel=GENERAL, thread_ts=root, recipient_user_id="U0NOBODY", recipient_team_id=TEAM
    )
    assert await error_of(stranger) == "user_not_found"
    dm = slack_sim.dm_channel(ALICE)
    dm_root = await thread(slack_sim, dm)
    started = await web.chat_startStream(channel=dm, thread_ts=dm_root, markdown_text="hi")
    assert slack_sim.streams[str(started["ts"])].recipient is None


async def test_a_stream_needs_a_thread_and_short_chunks(slack_sim: SlackSim) -> None:
    web, root = client(slack_sim), await thread(slack_sim)
    assert await error_of(web.chat_startStream(channel=GENERAL, thread_ts="", **RECIPIENT)) == (
        "invalid_arguments"
    )
    assert (
        await error_of(web.chat_startStream(channel=GENERAL, thread_ts="1.000009", **RECIPIENT))
        == "thread_not_found"
    )
    long = "x" * 12_001
    assert (
        await error_of(
            web.chat_startStream(channel=GENERAL, thread_ts=root, markdown_text=long, **RECIPIENT)
        )
        == "msg_too_long"
    )
    ts = str((await web.chat_startStream(channel=GENERAL, thread_ts=root, **RECIPIENT))["ts"])
    assert await error_of(web.chat_appendStream(channel=GENERAL, ts=ts, markdown_text=long)) == (
        "msg_too_long"
    )
    await web.chat_appendStream(channel=GENERAL, ts=ts, markdown_text="x" * 12_000)
    assert await error_of(web.chat_appendStream(channel=GENERAL, ts=ts, markdown_text="")) == (
        "no_text"
    )


async def test_refusals_as_slack_sends_them(slack_sim: SlackSim) -> None:
    web, root = client(slack_sim), await thread(slack_sim)
    assert (
        await error_of(
            client(slack_sim, "xoxb-wrong").chat_startStream(
                channel=GENERAL, thread_ts=root, **RECIPIENT
            )
        )
        == "invalid_auth"
    )
    slack_sim.refuse_streams[GENERAL] = "streaming_not_enabled"
    assert await error_of(web.chat_startStream(channel=GENERAL, thread_ts=root, **RECIPIENT)) == (
        "streaming_not_enabled"
    )
    del slack_sim.refuse_streams[GENERAL]
    slack_sim.channels[GENERAL]["is_member"] = False
    assert await error_of(web.chat_startStream(channel=GENERAL, thread_ts=root, **RECIPIENT)) == (
        "not_in_channel"
    )
    slack_sim.channels[GENERAL]["is_member"] = True
    slack_sim.connect_users.add(ALICE.id)
    ts = str((await web.chat_startStream(channel=GENERAL, thread_ts=root, **RECIPIENT))["ts"])
    assert await error_of(web.chat_stopStream(channel=GENERAL, ts=ts)) == "user_not_found"
    assert slack_sim.streams[ts].live


async def test_stream_writes_count_in_the_channel_window(slack_sim: SlackSim) -> None:
    web, root = client(slack_sim), await thread(slack_sim)
    slack_sim.rate_limit = RateLimit(per_channel=2, window=10.0, retry_after=3)
    ts = str((await web.chat_startStream(channel=GENERAL, thread_ts=root, **RECIPIENT))["ts"])
    await web.chat_appendStream(channel=GENERAL, ts=ts, markdown_text="a")
    with pytest.raises(SlackApiError) as caught:
        await web.chat_appendStream(channel=GENERAL, ts=ts, markdown_text="b")
    response = caught.value.response
    assert (response.status_code, response["error"]) == (429, "ratelimited")
    assert response.headers["Retry-After"] == "3"


async def test_native_stop_ends_the_threads_streams_and_tells_the_app(
    slack_sim: SlackSim,
) -> None:
    app = AsyncApp(
        name="sim-selftest", client=client(slack_sim), signing_secret=slack_sim.signing_secret
    )
    seen: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    @app.event("agent_session_stopped")
    async def stopped(event: dict[str, Any]) -> None:
        seen.put_nowait(event)

    @app.event("message")
    async def ignore() -> None:
        pass

    web, root = client(slack_sim), await thread(slack_sim)
    ts = str((await web.chat_startStream(channel=GENERAL, thread_ts=root, **RECIPIENT))["ts"])
    await web.chat_appendStream(channel=GENERAL, ts=ts, markdown_text="partial")
    async with socket_mode(app, slack_sim):
        sent = await slack_sim.stop_agent_session(GENERAL, root)
        event = await asyncio.wait_for(seen.get(), 5)
    assert sent["streaming_message_ts"] == [ts]
    assert {k: event[k] for k in ("channel", "thread_ts", "user", "streaming_message_ts")} == {
        "channel": GENERAL, "thread_ts": root, "user": ALICE.id, "streaming_message_ts": [ts]
    }  # fmt: skip
    assert slack_sim.streams[ts].stopped_by == "user"
    assert slack_sim.find_message(GENERAL, ts).text == "partial"  # type: ignore[union-attr]
    assert await error_of(web.chat_appendStream(channel=GENERAL, ts=ts, markdown_text="x")) == (
        "message_not_in_streaming_state"
    )


async def test_a_methods_tier_is_counted_across_the_workspace(slack_sim: SlackSim) -> None:
    web = client(slack_sim)
    slack_sim.tiers["chat.appendStream"] = Tier(2, 60.0, retry_after=7)
    streams = []
    for _ in range(2):  # two threads, one workspace
        root = await thread(slack_sim)
        started = await web.chat_startStream(channel=GENERAL, thread_ts=root, **RECIPIENT)
        streams.append(str(started["ts"]))
    await web.chat_appendStream(channel=GENERAL, ts=streams[0], markdown_text="a")
    await web.chat_appendStream(channel=GENERAL, ts=streams[1], markdown_text="b")
    with pytest.raises(SlackApiError) as caught:
        await web.chat_appendStream(channel=GENERAL, ts=streams[0], markdown_text="c")
    assert (caught.value.response.status_code, caught.value.response.headers["Retry-After"]) == (
        429, "7"
    )  # fmt: skip
    assert slack_sim.tier_limited == 1 and slack_sim.streams[streams[0]].text == "a"
    await web.chat_startStream(channel=GENERAL, thread_ts=root, **RECIPIENT)  # untiered
