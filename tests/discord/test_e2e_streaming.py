"""End to end: an answer streamed on Discord, through the real discord.py against the
simulator and the scripted model server streaming tokens with gaps.

Discord has no native stream: the first words are one message, edited in place with the
growing text no faster than the channel's edit budget (5 sends and edits in any 5 s, the
gateway's pace; the simulator answers Discord's 429 over it), and the final reply's first
rendered chunk replaces it, the rest following as new messages (docs/architecture.md,
"Streaming"). The pace is measured on the test clock the gateway and the simulator share:
no test waits a second for it.
"""

from __future__ import annotations

import asyncio
from itertools import pairwise

from tests.discord.conftest import GatewayFactory
from tests.discord.harness import STOPPED, Gateway, dm_key
from tests.platform_sim.base import Call
from tests.platform_sim.discord_sim import ALICE, DiscordSim
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call

GAP = 0.005
"""Real seconds between two streamed tokens."""


def long_answer(words: int) -> str:
    return " ".join(f"word{n:04d}" for n in range(words)) + "."


def outbound(sim: DiscordSim, channel: str) -> list[Call]:
    """The bot's sends and edits of messages in ``channel``, in arrival order."""
    return [c for c in sim.calls if c.method in ("create_message", "edit_message")
            and c.params.get("channel_id") == channel]  # fmt: skip


def rendered_chunks(run: Gateway, markdown: str) -> list[str]:
    caps = run.adapter.capabilities
    rendered = caps.renderer.render(markdown)
    return list(caps.renderer.chunk(rendered, caps.max_text_length, caps.length_unit))


def most_in_any_window(times: list[float], seconds: float) -> int:
    return max(sum(1 for t in times if start <= t < start + seconds) for start in times)


async def answered(run: Gateway, sim: DiscordSim, text: str, answer: str) -> str:
    """Alice's DM once ``answer``'s last chunk is shown and the turn is over."""
    dm = sim.dm_channel(ALICE).id
    await sim.user_says(dm, text)
    last = rendered_chunks(run, answer)[-1]
    await sim.wait_for_bot_message(dm, lambda m: m.text == last, timeout=10)
    await run.idle(dm_key(dm))
    return dm


async def test_one_message_is_edited_with_growing_text_within_the_budget_then_the_reply(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    answer = long_answer(60)
    model_server.script(reply_text(answer, gap=GAP))
    run = await gateway(streaming="native")
    dm = await answered(run, discord_sim, "tell me a lot", answer)

    calls = outbound(discord_sim, dm)
    [streamed] = discord_sim.bot_messages(dm)
    assert [c.method for c in calls[:1]] == ["create_message"]
    assert {c.method for c in calls[1:]} == {"edit_message"}
    assert all(c.params["message_id"] == streamed.id for c in calls[1:])
    shown = [str(c.params["content"]) for c in calls]
    assert len(shown) >= 3, shown  # the first words, at least one growing edit, the reply
    texts = shown[:-1]
    assert all(b.startswith(a) and len(b) > len(a) for a, b in pairwise(texts))
    assert all(answer.startswith(t) for t in texts)
    assert streamed.text == rendered_chunks(run, answer)[0]
    times = [c.at for c in calls]
    streamed_at = times[:-1]  # the reply's own edit is not a stream update
    assert all(b - a >= 1.0 - 1e-6 for a, b in pairwise(streamed_at))
    assert most_in_any_window(times, 5.0) <= 5
    assert discord_sim.edit_limited == 0 and run.adapter.rate_limits == 0
    assert all(c.status == 200 for c in discord_sim.calls if c.method.endswith("message"))


async def test_a_reply_longer_than_a_message_replaces_the_stream_then_follows_once(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    answer = long_answer(300)  # ~2,700 characters: two messages
    model_server.script(reply_text(answer, gap=GAP / 5))
    run = await gateway(streaming="edit")  # the same as native on Discord
    dm = await answered(run, discord_sim, "tell me everything", answer)

    chunks = rendered_chunks(run, answer)
    assert len(chunks) == 2
    assert [m.text for m in discord_sim.bot_messages(dm)] == chunks
    first, second = discord_sim.bot_messages(dm)
    assert first.history, "the first chunk is the streamed message, edited"
    assert not second.history
    streamed = [str(v.get("content")) for v in first.history]
    assert all(len(text) <= 2000 for text in streamed)
    assert len(discord_sim.calls_to("create_message")) == 2
    assert discord_sim.edit_limited == 0 and run.adapter.rate_limits == 0


async def test_streaming_off_sends_only_the_final_reply(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    answer = long_answer(40)
    model_server.script(reply_text(answer, gap=GAP))
    run = await gateway(streaming="off")
    dm = await answered(run, discord_sim, "just the answer", answer)

    calls = outbound(discord_sim, dm)
    assert [c.method for c in calls] == ["create_message"]
    assert [m.text for m in discord_sim.bot_messages(dm)] == rendered_chunks(run, answer)


async def test_progress_and_the_stream_share_the_channel_budget_with_no_429(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    answer = long_answer(40)
    model_server.script(
        reply_tool_call("terminal", {"command": "echo checked"}),
        reply_text(answer, gap=GAP),
    )
    run = await gateway(streaming="native")
    dm = await answered(run, discord_sim, "check, then tell me", answer)

    progress, streamed = discord_sim.bot_messages(dm)
    assert "terminal" in progress.text
    assert streamed.text == answer and streamed.history
    times = [c.at for c in outbound(discord_sim, dm)]
    assert most_in_any_window(times, 5.0) <= 5
    assert discord_sim.edit_limited == 0 and run.adapter.rate_limits == 0


async def test_stop_during_a_streamed_answer_removes_it_with_one_notice_and_the_next_runs(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    release = asyncio.Event()
    partial = long_answer(20)
    model_server.script(
        reply_text(partial, gap=GAP, stall_after=6, until=release),  # role + 5 words
        reply_text("next one done"),
    )
    run = await gateway(streaming="native")
    dm = discord_sim.dm_channel(ALICE).id
    await discord_sim.user_says(dm, "start writing")
    streamed = await discord_sim.wait_for_bot_message(dm, lambda m: m.text.startswith("word0000"))
    await discord_sim.user_says(dm, "/stop")
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == STOPPED)
    await run.idle(dm_key(dm))
    await discord_sim.wait_for(lambda: streamed.deleted, timeout=5)
    release.set()
    await discord_sim.user_says(dm, "next")
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "next one done")
    await run.idle(dm_key(dm))

    shown = [m.text for m in discord_sim.bot_messages(dm) if not m.deleted]
    assert shown == [STOPPED, "next one done"]
    assert not any(partial in m.text for m in discord_sim.bot_messages(dm))
