"""End to end on Discord (the gateway composed by the wiring, ``[memory] enabled``):
memory follows a person across platforms once linked, and a person's private fact never
crosses into a shared thread — not its prompt, not a child agent's, not the compaction
summary's request (issue 32, README "Memory")."""

from __future__ import annotations

import json
from pathlib import Path

from core.store.memory import memory_store
from core.store.sqlite import SqliteStore
from tests.discord.conftest import GatewayFactory
from tests.platform_sim.discord_sim import ALICE, BOB, GENERAL, DiscordSim
from tests.platform_sim.telegram_sim import ALICE as TG_ALICE
from tests.platform_sim.telegram_sim import TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call
from tests.telegram.harness import Gateway as TelegramGateway
from tests.telegram.harness import GatewaySetup

FACT = "Alice's cat is called Mochi"
MEMORY = {"enabled": True}


def system_of(model_server: ScriptedModelServer, index: int) -> str:
    return str(model_server.requests[index].messages[0]["content"])


async def test_after_link_discord_sees_the_fact_saved_on_telegram_and_bob_does_not(
    gateway: GatewayFactory,
    discord_sim: DiscordSim,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
    tmp_path: Path,
) -> None:
    model_server.script(
        reply_tool_call("memory_save", {"text": FACT}),
        reply_text("Noted."),
        reply_text("Hi Alice."),
        reply_text("Hi Bob."),
    )
    (tmp_path / "tg").mkdir()
    telegram = TelegramGateway(
        telegram_sim, model_server, store, tmp_path / "tg", GatewaySetup(memory=True)
    )
    await telegram.start()
    try:
        await telegram_sim.user_says(TG_ALICE.id, "remember my cat is Mochi")
        await telegram_sim.wait_for_bot_message(TG_ALICE.id, lambda m: m.text == "Noted.")
    finally:
        await telegram.stop()
    # what a completed /link records: both identities are one person
    await store.link_identity("telegram", str(TG_ALICE.id), "alice")
    await store.link_identity("discord", ALICE.id, "alice")
    await gateway(memory=MEMORY)
    await discord_sim.user_says(discord_sim.dm_channel(ALICE), "hello")
    await discord_sim.wait_for_bot_message(
        discord_sim.dm_channel(ALICE), lambda m: m.text == "Hi Alice."
    )
    assert FACT in system_of(model_server, 2)
    await discord_sim.user_says(discord_sim.dm_channel(BOB), "hello", user=BOB)
    await discord_sim.wait_for_bot_message(
        discord_sim.dm_channel(BOB), lambda m: m.text == "Hi Bob."
    )
    assert FACT not in system_of(model_server, 3)


async def test_a_private_fact_reaches_no_child_agent_nor_summary_in_a_shared_thread(
    gateway: GatewayFactory,
    discord_sim: DiscordSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    await memory_store(store).add_memory(f"person:discord:{ALICE.id}", FACT)
    model_server.script(
        reply_tool_call("delegate", {"task": "Find what Alice's cat is called"}),
        reply_tool_call("memory_search", {"query": "Alice cat Mochi"}),  # the child
        reply_text("Nothing found."),  # the child's answer
        reply_text("Asked a helper."),
        reply_text("Second."),
        reply_text("Third."),
        reply_text("The summary."),
    )
    await gateway(memory=MEMORY)
    thread = await discord_sim.add_thread(GENERAL, "shared")
    mention = discord_sim.mention
    for text, answer in (("what is my cat called?", "Asked a helper."), ("two", "Second."),
                         ("three", "Third.")):  # fmt: skip
        await discord_sim.user_says(GENERAL, f"{mention} {text}", thread=thread)
        await discord_sim.wait_for_bot_message(thread, lambda m, a=answer: m.text == a)
    await discord_sim.user_says(GENERAL, f"{mention} /compact", thread=thread)
    await discord_sim.wait_for_bot_message(thread, lambda m: "Compacted" in m.text)
    requests = model_server.requests
    child = requests[1].messages
    assert "/child:" in str(child[0]["content"]) and FACT not in str(child[0]["content"])
    assert requests[2].messages[-1]["content"] == "Nothing remembered matches."
    summary = requests[-1].messages
    assert str(summary[0]["content"]).startswith("You compress")
    assert all(FACT not in json.dumps(request.messages) for request in requests)
