"""End to end (Telegram simulator, scripted model): memory scoped to a person and a chat
(issue 32, README "Memory")."""

from __future__ import annotations

from tests.platform_sim.telegram_sim import ALICE, BOB, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call
from tests.telegram.harness import GatewayFactory

FACT = "Alice's cat is called Mochi"
GROUP = -100555


def system_of(model_server: ScriptedModelServer, index: int) -> str:
    message = model_server.requests[index].messages[0]
    assert message["role"] == "system"
    return str(message["content"])


async def test_a_fact_saved_in_a_dm_is_in_the_persons_next_session_and_nobody_elses(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("memory_save", {"text": FACT}),
        reply_text("Noted."),
        reply_text("Hi Alice."),
        reply_text("Hi Bob."),
    )
    await gateway(memory=True)
    await telegram_sim.user_says(ALICE.id, "remember my cat is Mochi")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Noted.")
    assert "Saved as #" in model_server.requests[1].messages[-1]["content"]
    assert system_of(model_server, 1) == system_of(model_server, 0)  # frozen in the session
    assert FACT not in system_of(model_server, 1)
    await telegram_sim.user_says(ALICE.id, "/new")
    await telegram_sim.user_says(ALICE.id, "hello")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Hi Alice.")
    assert FACT in system_of(model_server, 2)
    await telegram_sim.user_says(BOB.id, "hello")
    await telegram_sim.wait_for_bot_message(BOB.id, lambda m: m.text == "Hi Bob.")
    assert FACT not in system_of(model_server, 3)


async def test_in_a_group_private_facts_stay_out_until_shared(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    telegram_sim.add_group(GROUP)
    model_server.script(
        reply_tool_call("memory_save", {"text": FACT}),
        reply_text("Noted."),
        reply_tool_call("memory_search", {"query": "cat Mochi"}),
        reply_text("No idea."),
        reply_tool_call("memory_save", {"text": "The group meets on Fridays", "scope": "chat"}),
        reply_text("Saved for the group."),
        reply_tool_call("memory_search", {"query": "cat Mochi Fridays"}),
        reply_text("Found."),
    )
    await gateway(memory=True)
    await telegram_sim.user_says(ALICE.id, "remember my cat")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Noted.")
    await telegram_sim.user_says(GROUP, "@test_bot what is my cat called?", user=ALICE)
    await telegram_sim.wait_for_bot_message(GROUP, lambda m: m.text == "No idea.")
    assert FACT not in system_of(model_server, 2)
    assert model_server.requests[3].messages[-1]["content"] == "Nothing remembered matches."
    await telegram_sim.user_says(GROUP, "@test_bot note: we meet Fridays", user=BOB)
    await telegram_sim.wait_for_bot_message(GROUP, lambda m: m.text == "Saved for the group.")
    await telegram_sim.user_says(GROUP, "/memory share on", user=ALICE)
    await telegram_sim.wait_for_bot_message(GROUP, lambda m: "may now be used" in m.text)
    await telegram_sim.user_says(GROUP, "@test_bot cat?", user=ALICE)
    await telegram_sim.wait_for_bot_message(GROUP, lambda m: m.text == "Found.")
    found = model_server.requests[7].messages[-1]["content"]
    assert FACT in found and "Fridays" in found


async def test_memory_commands_list_forget_and_refuse_others(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_tool_call("memory_save", {"text": FACT}), reply_text("Noted."))
    await gateway(memory=True)
    await telegram_sim.user_says(ALICE.id, "remember my cat")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Noted.")
    await telegram_sim.user_says(ALICE.id, "/memory")
    listed = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "remember" in m.text)
    assert FACT in listed.text
    entry_id = listed.text.split("#", 1)[1].split(" ", 1)[0]
    await telegram_sim.user_says(BOB.id, f"/memory forget {entry_id}")
    await telegram_sim.wait_for_bot_message(BOB.id, lambda m: "No entry" in m.text)
    await telegram_sim.user_says(BOB.id, "/memory")
    await telegram_sim.wait_for_bot_message(BOB.id, lambda m: "(nothing)" in m.text)
    await telegram_sim.user_says(ALICE.id, "/memory off")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "Memory off" in m.text)
    await telegram_sim.user_says(ALICE.id, f"/memory forget {entry_id}")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: f"Forgot #{entry_id}" in m.text)
