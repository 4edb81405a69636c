"""End to end: an answer streamed on Slack, through the real slack-bolt / slack_sdk against
the simulator and the scripted model server streaming tokens with gaps.

In a thread the answer is a Slack chat stream: ``chat.startStream``, ``chat.appendStream``
of what is new at most once a second (the gateway's pace, kept on the test clock the
simulator's ``Call.at`` reads), ``chat.stopStream`` when the turn ends, then the rendered
reply is a ``chat.update`` of the stream's own message — no second ``chat.postMessage``.
Where Slack refuses the stream the answer is one message edited in place, and it arrives
once. The Stop button of the thread's agent session (``agent_session_stopped``) ends the
running turn as ``/stop`` does; a stop for a stream that ended changes nothing
(docs/architecture.md, "Streaming"; adapters/slack/streams.py).
"""

from __future__ import annotations

import asyncio
import time
from itertools import pairwise

import pytest

from adapters.base import ChatRef, RateLimit
from tests.platform_sim.base import Call, SimMessage
from tests.platform_sim.slack_sim import ALICE, GENERAL, SlackSim, Tier
from tests.slack.conftest import GatewayFactory
from tests.slack.harness import SlackGateway, replies_in, thread_key
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call

GAP = 0.005
"""Real seconds between two streamed tokens."""
STOPPED = "⏹ Stopped."
STREAM_METHODS = ("chat.startStream", "chat.appendStream", "chat.stopStream")


def long_answer(words: int) -> str:
    return "The answer is **42**: " + " ".join(f"word{n:03d}" for n in range(words)) + "."


def rendered(run: SlackGateway, markdown: str) -> list[str]:
    caps = run.adapter.capabilities
    text = caps.renderer.render(markdown)
    return list(caps.renderer.chunk(text, caps.max_text_length, caps.length_unit))


def writes(sim: SlackSim, channel: str) -> list[Call]:
    """The bot's stream calls and message writes in ``channel``, in arrival order."""
    methods = {*STREAM_METHODS, "chat.postMessage", "chat.update", "chat.delete"}
    return [c for c in sim.calls if c.method in methods and c.params.get("channel") == channel]


async def ask(
    run: SlackGateway, sim: SlackSim, text: str, answer: str, *, channel: str = GENERAL
) -> SimMessage:
    """Alice asks in a new thread (a mention in the channel, a DM thread reply); returns
    her message once the answer's last chunk is shown and the turn is over."""
    if channel == GENERAL:
        asked = await sim.user_says(GENERAL, f"{sim.mention} {text}")
        thread, key = asked.id, thread_key(GENERAL, asked.id)
    else:
        key = f"slack:dm:{channel}"
        root = await sim.user_says(channel, "hello")
        await sim.wait_for_bot_message(channel, lambda m: m.thread is None)
        await run.idle(key)  # the greeting's turn is over, so the question is not queued
        asked = await sim.user_says(channel, text, thread=root.id)
        thread = root.id
    last = rendered(run, answer)[-1]
    await sim.wait_for_bot_message(channel, lambda m: m.thread == thread and m.text == last)
    await run.idle(key)
    return asked


async def adapter_knows(run: SlackGateway, chat: ChatRef) -> None:
    """Until the adapter has Slack's answer to its ``chat.startStream``."""
    await asyncio.wait_for(run.adapter.streams.wait_live(chat), 5)


@pytest.mark.parametrize("where", ["channel thread", "dm thread"])
async def test_a_streamed_answer_is_the_streams_own_message(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    where: str,
) -> None:  # fmt: skip
    answer = long_answer(60)
    dm = slack_sim.dm_channel(ALICE)
    channel = GENERAL if where == "channel thread" else dm
    model_server.script(*([reply_text("hi")] if channel == dm else []),
                        reply_text(answer, gap=GAP))  # fmt: skip
    run = await slack_gateway("socket", streaming="native")
    asked = await ask(run, slack_sim, "tell me a lot", answer, channel=channel)
    thread = asked.thread or asked.id

    [stream] = slack_sim.streams.values()
    calls = [c for c in writes(slack_sim, channel)
             if c.params.get("thread_ts") == thread or c.params.get("ts") == stream.ts]  # fmt: skip
    methods = [c.method for c in calls]
    assert methods[0] == "chat.startStream" and methods[-2:] == ["chat.stopStream", "chat.update"]
    assert set(methods[1:-2]) == {"chat.appendStream"} and len(methods) >= 4, methods
    assert answer.startswith(stream.text) and len(stream.text) > len("The answer")
    [message] = replies_in(slack_sim, channel, thread)  # no second chat.postMessage
    assert message.id == stream.ts and message.text == rendered(run, answer)[0]
    start = next(c for c in calls if c.method == "chat.startStream").params
    assert start.get("recipient_user_id") == ALICE.id  # required in a channel, given in DMs
    paced = [c.at for c in calls if c.method in STREAM_METHODS[:2]]
    assert all(b - a >= 1.0 - 1e-6 for a, b in pairwise(paced))
    refused = [(c.method, c.status) for c in calls if c.status != 200]
    assert refused == []


async def test_a_refused_stream_falls_back_to_edits_and_the_answer_arrives_once(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    slack_sim.refuse_streams[GENERAL] = "streaming_not_enabled"
    first, second = long_answer(40), long_answer(30)
    model_server.script(reply_text(first, gap=GAP), reply_text(second, gap=GAP))
    run = await slack_gateway("socket", streaming="native")
    asked = await ask(run, slack_sim, "tell me", first)

    assert [m.text for m in replies_in(slack_sim, GENERAL, asked.id)] == rendered(run, first)
    [streamed] = replies_in(slack_sim, GENERAL, asked.id)
    assert streamed.history, "the answer is the message edited in place"
    calls = writes(slack_sim, GENERAL)
    assert [c.method for c in calls].count("chat.startStream") == 1
    assert [c.params["text"] for c in calls if c.method == "chat.postMessage"
            and c.params.get("thread_ts") == asked.id] == [streamed.history[0]["text"]]  # fmt: skip

    await slack_sim.user_says(GENERAL, f"{slack_sim.mention} and again", thread=asked.id)
    last = rendered(run, second)[-1]
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == last)
    await run.idle(thread_key(GENERAL, asked.id))
    assert [c.method for c in writes(slack_sim, GENERAL)].count("chat.startStream") == 1
    assert [m.text for m in replies_in(slack_sim, GENERAL, asked.id)] == [
        *rendered(run, first), *rendered(run, second)
    ]  # fmt: skip


async def test_the_agent_session_stop_ends_the_turn_once_and_the_next_message_runs(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_text("", chunks=["Working ", "on it, ", "slowly"], stall_after=3),
        reply_text("after the stop"),
    )
    run = await slack_gateway("socket", streaming="native")
    asked = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} take your time")
    key = thread_key(GENERAL, asked.id)
    stream = await slack_sim.wait_for(
        lambda: next((s for s in slack_sim.streams.values() if s.text), None)
    )
    await adapter_knows(run, ChatRef("slack", GENERAL, asked.id))
    started = time.monotonic()
    await slack_sim.stop_agent_session(GENERAL, asked.id)
    await run.idle(key)
    assert time.monotonic() - started < 1.0
    texts = [m.text for m in replies_in(slack_sim, GENERAL, asked.id)]
    assert texts.count(STOPPED) == 1
    shown = slack_sim.find_message(GENERAL, stream.ts)
    assert shown is not None and not shown.deleted and shown.text == stream.text  # kept

    await slack_sim.user_says(GENERAL, "go on", thread=asked.id)
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "after the stop")
    await run.idle(key)
    assert [m.text for m in replies_in(slack_sim, GENERAL, asked.id)].count(STOPPED) == 1


async def test_a_stop_for_a_stream_that_ended_changes_nothing(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    answer = long_answer(20)
    model_server.script(reply_text(answer, gap=GAP), reply_text("the next answer"))
    run = await slack_gateway("socket", streaming="native")
    asked = await ask(run, slack_sim, "a short one", answer)
    before = [(m.id, m.text) for m in replies_in(slack_sim, GENERAL, asked.id)]

    sent = await slack_sim.stop_agent_session(GENERAL, asked.id)
    assert sent["streaming_message_ts"] == []  # Slack had no live stream to stop
    await slack_sim.user_says(GENERAL, "one more", thread=asked.id)
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "the next answer")
    await run.idle(thread_key(GENERAL, asked.id))
    after = [(m.id, m.text) for m in replies_in(slack_sim, GENERAL, asked.id)]
    assert after[: len(before)] == before and [t for _, t in after[len(before) :]] == [
        "the next answer"
    ]  # fmt: skip
    assert STOPPED not in [t for _, t in after]


async def test_a_preamble_to_a_tool_gives_way_to_the_answers_stream(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    answer = long_answer(20)
    model_server.script(
        reply_tool_call("terminal", {"command": "true"}, content="Let me check that first.",
                        gap=GAP),
        reply_text(answer, gap=GAP),
    )  # fmt: skip
    run = await slack_gateway("socket", streaming="native")
    asked = await ask(run, slack_sim, "check it", answer)

    [first, second] = [s for s in slack_sim.streams.values() if s.thread_ts == asked.id]
    assert first.text.startswith("Let me check")
    gone = slack_sim.find_message(GENERAL, first.ts)
    assert gone is not None and gone.deleted  # the preamble's stream gave way
    texts = [m.text for m in replies_in(slack_sim, GENERAL, asked.id)]
    assert texts[-1:] == rendered(run, answer)[:1] and len(texts) == 2, texts  # progress, answer
    assert "terminal" in texts[0]
    [answered] = [m for m in replies_in(slack_sim, GENERAL, asked.id) if m.id == second.ts]
    assert answered.text == rendered(run, answer)[0]
    assert answer not in [c.params.get("text") for c in slack_sim.calls_to("chat.postMessage")]


async def test_answers_streaming_at_once_keep_to_the_bots_stream_window(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    window = RateLimit(8, 60.0)  # STREAM_LIMIT's mechanism, small enough to be reached
    slack_sim.tiers["chat.appendStream"] = Tier(window.count, window.seconds)
    answers = [long_answer(30) + f" (answer {n})" for n in range(4)]
    model_server.script(*(reply_text(a, gap=GAP) for a in answers))
    run = await slack_gateway("socket", streaming="native", capabilities={"bot_limit": window})
    asked = [await slack_sim.user_says(GENERAL, f"{slack_sim.mention} q{n}") for n in range(4)]
    wanted = sorted(rendered(run, a)[0] for a in answers)

    def shown() -> list[str]:
        return sorted(m.text for q in asked for m in replies_in(slack_sim, GENERAL, q.id))

    await slack_sim.wait_for(lambda: shown() == wanted, timeout=10)
    for message in asked:
        await run.idle(thread_key(GENERAL, message.id))
    assert shown() == wanted  # every answer once
    live = [c for c in slack_sim.calls if c.method in STREAM_METHODS[:2]]
    assert len(live) > window.count  # the window was reached, and kept
    assert slack_sim.tier_limited == 0
    assert all(c.status == 200 for c in slack_sim.calls if c.method.startswith("chat."))
    assert [c.method for c in slack_sim.calls].count("chat.postMessage") == 0


async def test_a_dm_top_level_is_not_a_thread_its_answer_is_edited_in_place_once(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    answer = long_answer(40)
    model_server.script(reply_text(answer, gap=GAP))
    run = await slack_gateway("socket", streaming="native")
    dm = slack_sim.dm_channel(ALICE)
    await slack_sim.user_says(dm, "tell me")
    last = rendered(run, answer)[-1]
    await slack_sim.wait_for_bot_message(dm, lambda m: m.text == last)
    await run.idle(f"slack:dm:{dm}")

    [message] = replies_in(slack_sim, dm, None)
    assert message.text == rendered(run, answer)[0] and message.history  # edited in place
    methods = [c.method for c in writes(slack_sim, dm)]
    assert "chat.startStream" not in methods and methods.count("chat.postMessage") == 1
