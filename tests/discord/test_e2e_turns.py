"""End to end: a message during a turn (queued, or interrupting under ``interrupt``), live
progress as one message edited in place at the configured pace, "typing…" while a turn
runs."""

from __future__ import annotations

import asyncio
import itertools

from tests.discord.conftest import GatewayFactory
from tests.discord.harness import EDIT_INTERVAL, dm_key
from tests.platform_sim.base import Call, SimMessage
from tests.platform_sim.discord_sim import ALICE, DiscordSim
from tests.support.model_server import (
    ScriptedModelServer,
    reply_hang,
    reply_text,
    reply_tool_call,
    reply_tool_calls,
)

QUEUED = "⏳ Queued"
INTERRUPTING = "↪️ Interrupting"


def sent(sim: DiscordSim, channel: str, text: str) -> list[SimMessage]:
    """Bot messages in ``channel`` whose first version contained ``text``."""
    return [m for m in sim.bot_messages(channel)
            if text in str((m.history[0] if m.history else m.raw).get("content", ""))]  # fmt: skip


async def test_a_second_message_during_a_turn_is_queued_and_answered_after(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    release = asyncio.Event()
    model_server.script(reply_hang(reply_text("one done"), until=release), reply_text("two done"))
    run = await gateway()
    dm = discord_sim.dm_channel(ALICE).id
    await discord_sim.user_says(dm, "task one")
    await model_server.wait_for_requests(1)
    await discord_sim.user_says(dm, "task two")
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text.startswith(QUEUED))
    assert len(model_server.requests) == 1
    release.set()
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "two done")
    await run.idle(dm_key(dm))
    done = [m.text for m in discord_sim.bot_messages(dm) if m.text.endswith("done")]
    assert done == ["one done", "two done"]
    second = model_server.requests[1].messages
    assert [m["content"] for m in second if m["role"] == "user"] == ["task one", "task two"]


async def test_a_second_message_under_interrupt_stops_the_turn_and_runs_next(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_hang(reply_text("too late")), reply_text("on it: the new task"))
    run = await gateway(profile={"busy_policy": "interrupt"})
    dm = discord_sim.dm_channel(ALICE).id
    await discord_sim.user_says(dm, "old task")
    [first] = await model_server.wait_for_requests(1)
    await discord_sim.user_says(dm, "new task instead")
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "on it: the new task")
    await run.idle(dm_key(dm))
    assert first.closed.is_set()  # the hung model call was abandoned, not waited out
    assert sent(discord_sim, dm, "too late") == []
    assert len(sent(discord_sim, dm, INTERRUPTING)) == 1
    assert model_server.requests[1].messages[-1] == {"role": "user",
                                                     "content": "new task instead"}  # fmt: skip


def wrote(call: Call, progress: SimMessage) -> bool:
    """A successful send of the progress message, or an edit of it."""
    if call.status != 200:
        return False
    if call.method == "create_message":
        return "terminal" in str(call.params.get("content"))
    return call.method == "edit_message" and call.params.get("message_id") == progress.id


async def test_progress_is_one_message_edited_no_faster_than_the_interval_to_its_true_state(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    release = asyncio.Event()
    model_server.script(
        reply_tool_call("terminal", {"command": "sleep 0.1; echo one"}, id="c1"),
        reply_tool_calls(
            [("c2", "terminal", {"command": "echo two"}), ("c3", "read_file", {"path": "x"})]
        ),
        reply_tool_call("terminal", {"command": "sleep 0.1; echo three"}, id="c4"),
        reply_hang(reply_text("All three ran."), until=release),
    )
    run = await gateway()
    dm = discord_sim.dm_channel(ALICE).id
    await discord_sim.user_says(dm, "run the three steps")
    progress = await discord_sim.wait_for_bot_message(dm, lambda m: "echo three" in m.text)
    release.set()  # the last state was shown; now the answer
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "All three ran.")
    await run.idle(dm_key(dm))
    assert sent(discord_sim, dm, "terminal") == [progress]  # one message, edited in place
    writes = [c for c in discord_sim.calls if wrote(c, progress)]
    states = [w for w in writes if w.params.get("content") != "All three ran."]
    assert len(states) == len(progress.history) >= 2  # the last edit made it the reply
    gaps = [b.at - a.at for a, b in itertools.pairwise(states)]
    assert min(gaps) >= EDIT_INTERVAL - 0.01, gaps
    last = str(states[-1].params["content"])
    for shown in ("echo one", "echo two", "read\\_file", "echo three"):  # markdown-escaped
        assert shown in last
    assert last.index("echo two") < last.index("echo three")
    assert progress.text == "All three ran." and not progress.buttons


async def test_typing_shows_while_a_slow_turn_runs(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    release = asyncio.Event()
    model_server.script(reply_hang(reply_text("Thought it through."), until=release))
    run = await gateway()
    dm = discord_sim.dm_channel(ALICE).id
    await discord_sim.user_says(dm, "think slowly")
    await discord_sim.wait_for(lambda: discord_sim.typing(dm))  # after the first second
    release.set()
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "Thought it through.")
    await run.idle(dm_key(dm))
    assert len(discord_sim.typing(dm)) == 1
