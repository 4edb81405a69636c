"""End to end: a restart between receiving a Discord message and answering it answers
exactly once, and a copy of that message delivered again right after the restart runs no
second turn."""

from __future__ import annotations

from core.store.sqlite import SqliteStore
from tests.discord.conftest import GatewayFactory
from tests.discord.harness import Gateway, dm_key
from tests.platform_sim.base import SimMessage
from tests.platform_sim.discord_sim import ALICE, DiscordSim
from tests.support.model_server import ScriptedModelServer, reply_hang, reply_text

QUESTION = "what is 6 x 7?"
ANSWER = "Here is the answer, after the restart."


async def cut_short_by_a_restart(
    gateway: GatewayFactory, sim: DiscordSim, models: ScriptedModelServer, store: SqliteStore
) -> SimMessage:
    """Alice asks; the turn is thinking when the gateway stops."""
    first_run = await gateway()
    said = await sim.user_says(sim.dm_channel(ALICE), QUESTION)
    await models.wait_for_requests(1)  # stored, the turn is thinking
    await first_run.stop()
    record = await store.get_inbound("discord", said.id)
    assert record is not None and record.state == "processing"
    return said


async def answered_once(run: Gateway, sim: DiscordSim, models: ScriptedModelServer) -> None:
    dm = sim.dm_channel(ALICE).id
    await sim.wait_for_bot_message(dm, lambda m: m.text == ANSWER)
    await run.idle(dm_key(dm))
    await run.adapter.drain()
    replayed = models.requests[1].messages
    assert replayed[-1] == {"role": "user", "content": QUESTION}
    assert [m for m in replayed if m["role"] == "user"] == [replayed[-1]]  # stored once


async def test_a_restart_between_receipt_and_reply_answers_once(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:  # fmt: skip
    model_server.script(reply_hang(reply_text("lost in the restart")), reply_text(ANSWER))
    await cut_short_by_a_restart(gateway, discord_sim, model_server, store)
    second_run = await gateway()
    await answered_once(second_run, discord_sim, model_server)
    dm = discord_sim.dm_channel(ALICE)
    assert [m.text for m in discord_sim.bot_messages(dm) if not m.deleted] == [ANSWER]
    assert len(model_server.requests) == 2
    assert await store.unfinished_inbound("discord") == []


async def test_a_message_redelivered_right_after_a_restart_runs_no_second_turn(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:  # fmt: skip
    model_server.script(reply_hang(reply_text("lost in the restart")), reply_text(ANSWER),
                        reply_text("Next question answered."))  # fmt: skip
    said = await cut_short_by_a_restart(gateway, discord_sim, model_server, store)
    second_run = await gateway()
    await discord_sim.echo("MESSAGE_CREATE", said.raw, from_user=True)  # delivered again
    await answered_once(second_run, discord_sim, model_server)
    dm = discord_sim.dm_channel(ALICE)
    await discord_sim.user_says(dm, "next question")  # the redelivery was handled before it
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "Next question answered.")
    await second_run.idle(dm_key(dm.id))
    texts = [m.text for m in discord_sim.bot_messages(dm) if not m.deleted]
    assert texts == [ANSWER, "Next question answered."]
    asked = [r.messages[-1]["content"] for r in model_server.requests]
    assert asked == [QUESTION, QUESTION, "next question"]
    assert await store.unfinished_inbound("discord") == []
