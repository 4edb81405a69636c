"""What arrives in Slack: a long reply with a code block and a table, valid and complete;
``ratelimited`` answers delay a reply but lose and duplicate nothing; a Socket Mode
connection dropped mid-turn still delivers the reply once and keeps answering; the
thread's status is cleared after completion, stop, failure and while an approval waits."""

from __future__ import annotations

import asyncio

import pytest

from adapters.slack.receivers import SocketReceiver
from tests.platform_sim.base import SimError
from tests.platform_sim.slack_sim import GENERAL, SlackSim
from tests.slack.conftest import GatewayFactory
from tests.slack.harness import MODES, replies_in, texts, thread_key
from tests.support.model_replies import reply_error, reply_hang, reply_text, reply_tool_call
from tests.support.model_server import ScriptedModelServer

CODE = "\n".join(f"line_{i} = {i} * 2  # <tag> & more" for i in range(200))
TABLE = "| name | value |\n|---|---|\n| alpha | 1 |\n| beta | 22 |"
LONG = f"Intro <!channel> **bold**\n\n```python\n{CODE}\n```\n\n{TABLE}\n\nThe end."


@pytest.mark.parametrize("mode", MODES)
async def test_a_long_reply_with_code_and_a_table_arrives_valid_and_complete(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    mode: str,
) -> None:  # fmt: skip
    model_server.script(reply_text(LONG))
    run = await slack_gateway(mode)
    asked = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} write it")
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text.endswith("The end."))
    await run.idle(thread_key(GENERAL, asked.id))
    chunks = texts(replies_in(slack_sim, GENERAL, asked.id))
    assert len(chunks) > 1 and all(len(c) <= 4000 for c in chunks)
    assert all(c.count("```") % 2 == 0 for c in chunks)
    whole = "\n".join(chunks)
    assert all(f"line_{i} = {i} * 2  # &lt;tag&gt; &amp; more" in whole for i in range(200))
    assert "alpha | 1" in whole and "| name" not in whole.split("```")[-1]
    assert "<!channel>" not in whole and "&lt;!channel&gt;" in whole
    assert chunks[0].startswith("Intro") and "*bold*" in chunks[0]


@pytest.mark.parametrize("mode", MODES)
async def test_ratelimited_delays_the_reply_but_loses_and_duplicates_nothing(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    mode: str,
) -> None:  # fmt: skip
    model_server.script(reply_text("worth the wait"))
    run = await slack_gateway(mode)
    slack_sim.fail_next("chat.postMessage", SimError.rate_limit(1))
    asked = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} hi")
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "worth the wait")
    await run.idle(thread_key(GENERAL, asked.id))
    assert texts(replies_in(slack_sim, GENERAL, asked.id)) == ["worth the wait"]
    limited = [c for c in slack_sim.calls_to("chat.postMessage") if c.status == 429]
    assert len(limited) == 1


async def test_a_dropped_socket_mid_turn_still_delivers_once_and_keeps_answering(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    release = asyncio.Event()
    model_server.script(reply_hang(reply_text("survived"), until=release), reply_text("later"))
    run = await slack_gateway("socket")
    asked = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} long task")
    await model_server.wait_for_requests(1)
    assert await slack_sim.drop_connection() == 1
    await slack_sim.wait_for(lambda: slack_sim.connections_opened == 2)
    release.set()
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "survived")
    await run.idle(thread_key(GENERAL, asked.id))
    again = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} and now?")
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "later")
    assert texts(replies_in(slack_sim, GENERAL, asked.id)) == ["survived"]
    assert texts(replies_in(slack_sim, GENERAL, again.id)) == ["later"]


async def test_the_watchdog_replaces_a_connection_that_went_silent(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("heard you"))
    run = await slack_gateway("socket")
    receiver = run.adapter.receiver
    assert isinstance(receiver, SocketReceiver)
    await slack_sim.wait_for(lambda: slack_sim.sockets)
    assert await receiver.check() is False  # heard from just now: left alone
    receiver.watchdog_seconds = 0.0  # any silence is now too long
    assert await receiver.check() is True
    receiver.watchdog_seconds = 60.0
    await slack_sim.wait_for(lambda: slack_sim.connections_opened == 2)
    await slack_sim.user_says(GENERAL, f"{slack_sim.mention} still there?")
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "heard you")
    assert receiver.replaced >= 1


def status_of(sim: SlackSim, thread: str) -> str | None:
    return sim.statuses.get((GENERAL, thread))


async def test_status_is_shown_while_working_and_cleared_after_completion(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    release = asyncio.Event()
    model_server.script(reply_hang(reply_text("done"), until=release))
    run = await slack_gateway("socket")
    asked = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} think")
    await slack_sim.wait_for(lambda: status_of(slack_sim, asked.id) == "is thinking…")
    release.set()
    await run.idle(thread_key(GENERAL, asked.id))
    assert status_of(slack_sim, asked.id) == ""


async def test_status_is_cleared_when_the_turn_is_stopped(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_hang())
    run = await slack_gateway("socket")
    asked = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} think")
    await slack_sim.wait_for(lambda: status_of(slack_sim, asked.id) == "is thinking…")
    await slack_sim.user_says(GENERAL, "!stop", thread=asked.id)
    await run.idle(thread_key(GENERAL, asked.id))
    await slack_sim.wait_for(lambda: status_of(slack_sim, asked.id) == "")


async def test_status_is_cleared_when_the_turn_fails(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    release = asyncio.Event()
    failure = reply_error(400, "bad request", type="invalid_request_error")
    model_server.script(reply_hang(failure, until=release))
    run = await slack_gateway("socket")
    asked = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} think")
    await slack_sim.wait_for(lambda: status_of(slack_sim, asked.id) == "is thinking…")
    release.set()
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: "could not answer" in m.text)
    await run.idle(thread_key(GENERAL, asked.id))
    await slack_sim.wait_for(lambda: status_of(slack_sim, asked.id) == "")


async def test_status_is_cleared_while_an_approval_waits(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    release = asyncio.Event()
    risky = reply_tool_call("terminal", {"command": "rm -rf ./build"})
    model_server.script(reply_hang(risky, until=release))
    await slack_gateway("socket", profile={"approval_timeout": 30})
    asked = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} clean")
    await slack_sim.wait_for(lambda: status_of(slack_sim, asked.id) == "is thinking…")
    release.set()
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: "Approval needed" in m.text)
    await slack_sim.wait_for(lambda: status_of(slack_sim, asked.id) == "")
