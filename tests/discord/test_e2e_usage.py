"""Usage end to end on Discord (README "Usage and quotas"), composed as ``commonos run``
composes it: each model call's row carries the scripted server's usage exactly, the
sender and the chat (a DM; a channel member's session counts to the channel)."""

from __future__ import annotations

from core.store.sqlite import SqliteStore
from core.store.usage import UsageBook
from tests.discord.conftest import GatewayFactory
from tests.platform_sim.discord_sim import ALICE, BOB, GENERAL, DiscordSim
from tests.support.model_server import ScriptedModelServer, reply_text


async def test_usage_rows_match_the_servers_usage_with_person_and_chat(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:  # fmt: skip
    model_server.script(
        reply_text("one", usage=(1500, 21), cached_tokens=1280),
        reply_text("two", usage=(1630, 12), cached_tokens=1500),
        reply_text("three", usage=(700, 4)),
    )
    run = await gateway(thread_per_conversation=False)
    dm = discord_sim.dm_channel(ALICE)
    await discord_sim.user_says(dm, "hi")
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "one")
    await discord_sim.user_says(dm, "and again")
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "two")
    await discord_sim.user_says(GENERAL, f"{discord_sim.mention} hello", user=BOB)
    await discord_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "three")
    await run.idle(f"discord:channel:{GENERAL}:{BOB.id}")
    rows = await UsageBook(store).rows()
    assert [(r.person, r.chat, r.prompt_tokens, r.cached_tokens, r.completion_tokens,
             r.estimated, r.profile) for r in rows] == [
        (f"discord:{ALICE.id}", f"discord:dm:{dm.id}", 1500, 1280, 21, False, "default"),
        (f"discord:{ALICE.id}", f"discord:dm:{dm.id}", 1630, 1500, 12, False, "default"),
        (f"discord:{BOB.id}", f"discord:channel:{GENERAL}", 700, 0, 4, False, "default"),
    ]  # fmt: skip
    assert len({r.turn_id for r in rows}) == 3
