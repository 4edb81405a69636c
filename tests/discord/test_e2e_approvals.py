"""End to end: approval cards as buttons (DynamicItem), refused ephemerally for strangers,
answered after a restart; a slash command's deferred response replaced by its answer."""

from __future__ import annotations

from typing import Any

from tests.discord.conftest import GatewayFactory
from tests.platform_sim.base import SimMessage
from tests.platform_sim.discord_sim import ALICE, BOB, DiscordSim, Interaction
from tests.support.model_server import (
    ScriptedModelServer,
    reply_text,
    reply_tool_call,
)

EPHEMERAL = 1 << 6


def rm_call(target: str, id: str = "call_1") -> Any:
    return reply_tool_call("terminal", {"command": f"rm -rf ./{target}"}, id=id)


async def card_in(sim: DiscordSim, channel: str) -> SimMessage:
    return await sim.wait_for_bot_message(channel, lambda m: "Approval needed" in m.text
                                          and bool(m.buttons))  # fmt: skip


def approve_id(card: SimMessage) -> str:
    return next(b.data for b in card.buttons if b.data and b.data.endswith(":a"))


async def answered(sim: DiscordSim, inter: Interaction) -> str:
    """The ephemeral follow-up the presser got (after the deferred update)."""
    await sim.wait_for(lambda: inter.followups)
    assert inter.responses[0]["type"] == 6
    assert inter.followups[0].raw["flags"] & EPHEMERAL
    return inter.followups[0].text


async def test_strangers_press_is_refused_ephemerally_and_the_requesters_resolves(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(rm_call("scratch"), reply_text("Cleaned up."))
    run = await gateway()
    dm = discord_sim.dm_channel(ALICE).id
    scratch = run.workspace(f"discord:dm:{dm}") / "scratch"
    scratch.mkdir()
    await discord_sim.user_says(dm, "clean the scratch dir")
    card = await card_in(discord_sim, dm)
    refused = await answered(discord_sim, await discord_sim.press_button(card, approve_id(card),
                                                                         user=BOB))  # fmt: skip
    assert "only the person who asked" in refused and "scratch" not in refused
    await discord_sim.press_button(card, approve_id(card), user=ALICE)
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "Cleaned up.")
    await discord_sim.wait_for(lambda: not card.buttons)
    assert "Approved by" in card.text
    assert not scratch.exists()


async def test_timeout_expires_the_card_and_a_stale_press_is_already_decided(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(rm_call("logs"), reply_text("Left the logs alone."))
    await gateway(profile={"approval_timeout": 0.3})
    dm = discord_sim.dm_channel(ALICE).id
    await discord_sim.user_says(dm, "clear the logs")
    card = await card_in(discord_sim, dm)
    old, data = dict(card.raw), approve_id(card)
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "Left the logs alone.")
    await discord_sim.wait_for(lambda: not card.buttons)
    assert "Expired" in card.text
    stale = await discord_sim.press_stale(card, data, old)
    assert await answered(discord_sim, stale) == "Already decided."


async def test_a_press_on_a_card_from_before_a_restart_is_answered(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(rm_call("cache"))
    first = await gateway()
    dm = discord_sim.dm_channel(ALICE).id
    await discord_sim.user_says(dm, "clear the cache")
    card = await card_in(discord_sim, dm)
    old, data = dict(card.raw), approve_id(card)
    await first.stop()
    model_server.script(reply_text("unused"))
    await gateway()
    await discord_sim.wait_for(lambda: not card.buttons)
    press = await discord_sim.press_stale(card, data, old)
    text = await answered(discord_sim, press)
    assert "restarted" in text or text == "Already decided."
    assert "Cancelled" in card.text


async def test_slash_status_replaces_its_deferred_response(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    await gateway()
    dm = discord_sim.dm_channel(ALICE).id
    status = await discord_sim.use_command(dm, "status")
    await discord_sim.wait_for(lambda: status.original is not None and status.original.text)
    assert status.original is not None and "idle" in status.original.text.lower()
    assert discord_sim.calls_to("webhook_edit_original")


async def test_an_answer_after_the_interaction_token_expired_goes_out_as_a_message(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    await gateway()
    dm = discord_sim.dm_channel(ALICE).id
    discord_sim.token_lifetime = 0.0  # every token has expired by the time it is used
    status = await discord_sim.use_command(dm, "status")
    answer = await discord_sim.wait_for_bot_message(dm, lambda m: "idle" in m.text.lower())
    assert status.responses[0]["type"] == 5  # deferred in time ("thinking…")
    assert answer is not status.original
    assert [c.status for c in discord_sim.calls_to("webhook_edit_original")] == [401]
    sent = [c for c in discord_sim.calls_to("create_message") if c.status == 200]
    assert [c.params["content"] for c in sent] == [answer.text]
    assert sent[0].params["allowed_mentions"] == {"parse": []}
