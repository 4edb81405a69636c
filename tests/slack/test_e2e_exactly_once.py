"""End to end, ``commonos run`` as a real process: killed (SIGKILL) while a reply chunk's
``chat.postMessage`` is in flight — Slack posted it, the gateway never heard — the restarted
process finds the chunk in flight in its outbox, looks for it in the conversation
(``conversations.history`` / ``conversations.replies`` with ``include_all_metadata``: every
chunk carries its outbox key as message metadata), finds it and records it as sent instead
of posting it again. The model is asked once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.platform_sim.base import Json
from tests.platform_sim.slack_sim import ALICE, GENERAL, SlackSim
from tests.support.killed_run import kill_in_flight, outbox, restarted, settled, write_config
from tests.support.model_server import ScriptedModelServer, reply_text

QUESTION = "what is 6 x 7?"
ANSWER = "Forty-two, posted once."


@pytest.fixture
def home(tmp_path: Path, slack_sim: SlackSim, model_server: ScriptedModelServer) -> Path:
    write_config(tmp_path, model_server, f"""
[slack]
bot_token = "{slack_sim.bot_token}"
app_token = "{slack_sim.app_token}"
api_base_url = "{slack_sim.api_url}"
allowed_users = ["{ALICE.id}"]
streaming = "off"
""")  # fmt: skip
    return tmp_path


def the_answer(params: Json) -> bool:
    return params.get("text") == ANSWER


def posts_of_the_answer(sim: SlackSim) -> list[Json]:
    return [c.params for c in sim.calls_to("chat.postMessage") if the_answer(c.params)]


async def test_killed_while_a_dm_reply_is_in_flight_slack_shows_it_once_after_the_restart(
    home: Path, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text(ANSWER))
    dm = slack_sim.dm_channel(ALICE)
    hold = slack_sim.hold_next("chat.postMessage", the_answer)
    await kill_in_flight(home, hold, lambda: slack_sim.user_says(dm, QUESTION))
    [posted] = slack_sim.bot_messages(dm)
    assert outbox(home) == [(None, True)]  # in flight: started, not known sent

    async with restarted(home):
        await settled(home, "slack")
    [first] = posts_of_the_answer(slack_sim)  # never posted again
    assert first["metadata"]["event_payload"]["chunk"]  # the chunk's outbox key
    [looked] = slack_sim.calls_to("conversations.history")
    assert looked.params["channel"] == dm and looked.params["include_all_metadata"] in (1, "1")
    assert [m.text for m in slack_sim.bot_messages(dm)] == [ANSWER]
    assert outbox(home) == [(posted.id, True)]  # recorded as the message Slack has
    assert len(model_server.requests) == 1


async def test_killed_while_a_thread_reply_is_in_flight_it_is_found_among_the_replies(
    home: Path, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text(ANSWER))
    hold = slack_sim.hold_next("chat.postMessage", the_answer)
    asked: list[str] = []

    async def mention() -> None:
        asked.append((await slack_sim.user_says(GENERAL, f"{slack_sim.mention} {QUESTION}")).id)

    await kill_in_flight(home, hold, mention)
    async with restarted(home):
        await settled(home, "slack")
    assert len(posts_of_the_answer(slack_sim)) == 1
    [looked] = slack_sim.calls_to("conversations.replies")
    assert looked.params["ts"] == asked[0]
    replies = [m for m in slack_sim.bot_messages(GENERAL) if m.thread == asked[0]]
    assert [m.text for m in replies] == [ANSWER]
    assert len(model_server.requests) == 1


async def test_a_chunk_in_flight_that_never_reached_slack_is_posted_after_the_restart(
    home: Path, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text(ANSWER))
    dm = slack_sim.dm_channel(ALICE)
    hold = slack_sim.hold_next("chat.postMessage", the_answer)
    await kill_in_flight(home, hold, lambda: slack_sim.user_says(dm, QUESTION))
    [posted] = slack_sim.bot_messages(dm)
    posted.deleted = True  # as if Slack had never taken it: the lookup finds nothing

    async with restarted(home):
        await settled(home, "slack")
    assert len(posts_of_the_answer(slack_sim)) == 2
    assert [m.text for m in slack_sim.bot_messages(dm) if not m.deleted] == [ANSWER]
    assert len(model_server.requests) == 1
