"""Stopping works in Slack: ``/stop`` as a slash command in the channel, ``!stop`` (or a bare
``stop``) typed inside the thread, and the Stop button on the progress message each end the
turn — during a model call, a tool, or a pending approval — within a second, with one
notice; ``!steer`` reaches the model after the current tool."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from tests.platform_sim.base import SimMessage
from tests.platform_sim.slack_sim import ALICE, GENERAL, SlackSim
from tests.slack.conftest import GatewayFactory
from tests.slack.harness import MODES, replies_in, thread_key
from tests.support.model_replies import Reply, reply_hang, reply_text, reply_tool_call
from tests.support.model_server import ScriptedModelServer

STOPPED = "⏹ Stopped."
Stopper = Callable[[SlackSim, SimMessage], Awaitable[None]]


async def by_slash_command(sim: SlackSim, asked: SimMessage) -> None:
    await sim.use_command(GENERAL, "/stop", user=ALICE)


async def by_text_in_thread(sim: SlackSim, asked: SimMessage) -> None:
    await sim.user_says(GENERAL, "!stop", thread=asked.id)


async def by_bare_word(sim: SlackSim, asked: SimMessage) -> None:
    await sim.user_says(GENERAL, "stop", thread=asked.id)


async def by_stop_button(sim: SlackSim, asked: SimMessage) -> None:
    progress = await sim.wait_for_bot_message(
        GENERAL, lambda m: m.thread == asked.id and any(b.label == "⏹ Stop" for b in m.buttons)
    )
    await sim.press_button(progress, progress.button("⏹ Stop").data or "", user=ALICE)


STOPPERS = {
    "slash": by_slash_command,
    "text": by_text_in_thread,
    "word": by_bare_word,
    "button": by_stop_button,
}
WORK: dict[str, tuple[Reply, ...]] = {
    # a fast tool first, so the progress message (and its Stop button) exists
    "model call": (reply_tool_call("terminal", {"command": "true"}), reply_hang()),
    "tool": (
        reply_tool_call("terminal", {"command": "true"}, id="c1"),
        reply_tool_call("terminal", {"command": "sleep 30"}, id="c2"),
    ),
    "approval": (
        reply_tool_call("terminal", {"command": "true"}, id="c1"),
        reply_tool_call("terminal", {"command": "rm -rf ./build"}, id="c2"),
    ),
}


async def busy(sim: SlackSim, models: ScriptedModelServer, stage: str) -> SimMessage:
    asked = await sim.user_says(GENERAL, f"{sim.mention} do the work")
    await models.wait_for_requests(2)
    if stage == "approval":
        await sim.wait_for_bot_message(GENERAL, lambda m: "Approval needed" in m.text)
    return asked


@pytest.mark.parametrize("stage", list(WORK))
@pytest.mark.parametrize("how", list(STOPPERS))
async def test_stop_ends_the_turn_within_a_second_with_one_notice(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    how: str, stage: str,
) -> None:  # fmt: skip
    model_server.script(*WORK[stage], reply_text("after the stop"))
    run = await slack_gateway("socket")
    asked = await busy(slack_sim, model_server, stage)
    key = thread_key(GENERAL, asked.id)
    started = time.monotonic()
    await STOPPERS[how](slack_sim, asked)
    await run.idle(key)
    assert time.monotonic() - started < 1.0
    public = [m.text for m in replies_in(slack_sim, GENERAL, asked.id) if m.text == STOPPED]
    private = [e["text"] for e in slack_sim.ephemerals if e["text"] == STOPPED]
    assert len(public + private) == 1  # a press is answered to the presser alone
    progress = [m for m in slack_sim.bot_messages(GENERAL) if "Stopped —" in m.text]
    assert progress and not progress[0].buttons  # the Stop button left with the turn


@pytest.mark.parametrize("mode", MODES)
async def test_steer_reaches_the_model_after_the_current_tool(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    mode: str,
) -> None:  # fmt: skip
    release = asyncio.Event()
    model_server.script(
        reply_tool_call("terminal", {"command": "true"}),
        reply_hang(reply_text("ok"), until=release),
    )
    run = await slack_gateway(mode)
    asked = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} deploy")
    await model_server.wait_for_requests(1)
    await slack_sim.user_says(GENERAL, "!steer use staging", thread=asked.id)
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text.startswith("⏩"))
    requests = await model_server.wait_for_requests(2)
    release.set()
    await run.idle(thread_key(GENERAL, asked.id))
    assert "use staging" in str(requests[1].messages)
