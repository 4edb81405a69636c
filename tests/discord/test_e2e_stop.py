"""Stopping works in Discord: ``/stop`` as a slash command, ``/stop`` and ``!stop`` typed,
and the Stop button on the progress message each end the turn — during a model call, a
tool, or a pending approval — within a second, with one "Stopped" notice; ``/steer``
reaches the model in the request after the current tool."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from tests.discord.conftest import GatewayFactory
from tests.discord.harness import STOPPED, dm_key
from tests.platform_sim.base import SimMessage
from tests.platform_sim.discord_sim import ALICE, BOB, DiscordSim, Interaction
from tests.support.model_replies import Reply, reply_hang, reply_text, reply_tool_call
from tests.support.model_server import ScriptedModelServer

STOP_LABEL = "⏹ Stop"
DEFERRED = {"slash": 5, "button": 6}
"""A slash command is answered "thinking…" (5), a press with a deferred update (6)."""
Stopper = Callable[[DiscordSim, str], Awaitable[Interaction | None]]


async def progress_with_stop(sim: DiscordSim, dm: str) -> SimMessage:
    return await sim.wait_for_bot_message(dm, lambda m: any(b.label == STOP_LABEL
                                                            for b in m.buttons))  # fmt: skip


async def by_slash_command(sim: DiscordSim, dm: str) -> Interaction:
    return await sim.use_command(dm, "stop")


async def by_typed_slash(sim: DiscordSim, dm: str) -> None:
    await sim.user_says(dm, "/stop")


async def by_typed_bang(sim: DiscordSim, dm: str) -> None:
    await sim.user_says(dm, "!stop")


async def by_stop_button(sim: DiscordSim, dm: str) -> Interaction:
    progress = await progress_with_stop(sim, dm)
    return await sim.press_button(progress, progress.button(STOP_LABEL).data or "")


STOPPERS: dict[str, Stopper] = {
    "slash": by_slash_command,
    "typed /stop": by_typed_slash,
    "typed !stop": by_typed_bang,
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


async def busy(sim: DiscordSim, models: ScriptedModelServer, dm: str, stage: str) -> None:
    await sim.user_says(dm, "do the work")
    await models.wait_for_requests(2)
    await progress_with_stop(sim, dm)
    if stage == "approval":
        await sim.wait_for_bot_message(dm, lambda m: "Approval needed" in m.text)


def live_texts(sim: DiscordSim, dm: str) -> list[str]:
    return [m.text for m in sim.bot_messages(dm) if not m.deleted]


@pytest.mark.parametrize("stage", list(WORK))
@pytest.mark.parametrize("how", list(STOPPERS))
async def test_stop_ends_the_turn_within_a_second_with_one_notice(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer,
    how: str, stage: str,
) -> None:  # fmt: skip
    model_server.script(*WORK[stage], reply_text("after the stop"))
    run = await gateway()
    dm = discord_sim.dm_channel(ALICE).id
    await busy(discord_sim, model_server, dm, stage)
    started = time.monotonic()
    interaction = await STOPPERS[how](discord_sim, dm)
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == STOPPED, timeout=1)
    await run.idle(dm_key(dm))
    assert time.monotonic() - started < 1.0  # the notice shown, the session free
    if interaction is not None:  # deferred at once: no "This interaction failed"
        assert interaction.responses[0]["type"] == DEFERRED[how]
    if how == "slash":  # its "thinking…" response became the notice (or was deleted)
        await discord_sim.wait_for(lambda: interaction and interaction.original
                                   and (interaction.original.deleted
                                        or interaction.original.text))  # fmt: skip
    live = live_texts(discord_sim, dm)
    assert live.count(STOPPED) == 1 and "" not in live
    [progress] = [m for m in discord_sim.bot_messages(dm) if "Stopped —" in m.text]
    assert not progress.buttons  # the Stop button left with its turn
    assert all(not m.buttons for m in discord_sim.bot_messages(dm))  # so did the card's
    assert "after the stop" not in live


async def test_a_strangers_stop_button_press_is_refused_and_the_turn_runs_on(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    release = asyncio.Event()
    model_server.script(reply_tool_call("terminal", {"command": "true"}),
                        reply_hang(reply_text("finished anyway"), until=release))  # fmt: skip
    run = await gateway()
    dm = discord_sim.dm_channel(ALICE).id
    await discord_sim.user_says(dm, "do the work")
    progress = await progress_with_stop(discord_sim, dm)
    press = await discord_sim.press_button(progress, progress.button(STOP_LABEL).data or "",
                                           user=BOB)  # fmt: skip
    await discord_sim.wait_for(lambda: press.followups)
    assert press.followups[0].raw["flags"] & (1 << 6)  # ephemeral: Bob alone sees it
    assert "only the person who asked" in press.followups[0].text
    release.set()
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "finished anyway")
    await run.idle(dm_key(dm))
    assert STOPPED not in live_texts(discord_sim, dm)


async def test_steer_reaches_the_model_in_the_request_after_the_current_tool(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    run = await gateway()
    dm = discord_sim.dm_channel(ALICE).id
    go = run.workspace(dm_key(dm)) / "go"
    wait_for_go = "while [ ! -e go ]; do sleep 0.01; done; echo went"
    model_server.script(reply_tool_call("terminal", {"command": wait_for_go}),
                        reply_text("Done with the note."))  # fmt: skip
    await discord_sim.user_says(dm, "work")
    await model_server.wait_for_requests(1)
    steer = await discord_sim.use_command(dm, "steer", {"text": "use the blue one"})
    await discord_sim.wait_for(lambda: steer.original is not None
                               and steer.original.text.startswith("⏩"))  # fmt: skip
    go.touch()  # the tool ends only now: the steer is in before its result
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "Done with the note.")
    await run.idle(dm_key(dm))
    tool_result = next(m for m in model_server.requests[1].messages if m["role"] == "tool")
    assert "went" in str(tool_result["content"]) and "use the blue one" in str(tool_result)
    assert "use the blue one" not in str(model_server.requests[0].messages)
