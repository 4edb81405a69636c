"""End to end (Telegram simulator, scripted model): memory scoped to a person and a chat
(issue 32, README "Memory")."""

from __future__ import annotations

import json
from datetime import datetime
from zoneinfo import ZoneInfo

from core.store.memory import memory_store
from core.store.sqlite import SqliteStore
from gateway.config.memory import MemorySection
from gateway.config.schedule import ScheduleSection
from gateway.schedule.feature import ScheduleFeature
from tests.platform_sim.telegram_sim import ALICE, BOB, TelegramSim
from tests.support.manual_clock import ManualClock
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


async def test_at_the_cap_the_model_is_told_to_consolidate_and_a_duplicate_is_not_stored(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("memory_save", {"text": FACT}),
        reply_tool_call("memory_save", {"text": "  alice's CAT is called   mochi "}),
        reply_tool_call("memory_save", {"text": "Alice plays the cello"}),
        reply_text("Done."),
    )
    await gateway(memory=MemorySection(enabled=True, max_entries_per_scope=1))
    await telegram_sim.user_says(ALICE.id, "remember these")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Done.")
    results = [str(model_server.requests[n].messages[-1]["content"]) for n in (1, 2, 3)]
    assert results[0].startswith("Saved as #")
    entry = results[0].removeprefix("Saved as #").split(" ", 1)[0]
    assert results[1] == f"Already remembered as #{entry}; not saved twice."
    assert results[2].startswith("Memory person telegram:42 is full (1 entries)")
    assert "Consolidate first" in results[2] and "memory_forget" in results[2]
    await telegram_sim.user_says(ALICE.id, "/memory")
    listed = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "remember" in m.text)
    assert listed.text.count("#") == 1 and "cello" not in listed.text


async def test_memory_commands_in_a_group_show_and_forget_nothing_for_a_non_approver(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    telegram_sim.add_group(GROUP)
    model_server.script(
        reply_tool_call("memory_save", {"text": "The group meets on Fridays", "scope": "chat"}),
        reply_text("Saved for the group."),
        reply_tool_call("memory_save", {"text": FACT}),
        reply_text("Noted."),
    )
    await gateway(memory=True)
    await telegram_sim.user_says(GROUP, "@test_bot note: we meet Fridays", user=ALICE)
    await telegram_sim.wait_for_bot_message(GROUP, lambda m: m.text == "Saved for the group.")
    saved = str(model_server.requests[1].messages[-1]["content"])
    entry = saved.removeprefix("Saved as #").split(" ", 1)[0]
    await telegram_sim.user_says(ALICE.id, "remember my cat")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Noted.")
    await telegram_sim.user_says(GROUP, "/memory", user=ALICE)
    listed = await telegram_sim.wait_for_bot_message(GROUP, lambda m: "entries about you" in m.text)
    assert "1 entries about you" in listed.text
    assert FACT not in listed.text and "Fridays" not in listed.text  # no approver: counts only
    await telegram_sim.user_says(GROUP, f"/memory forget {entry}", user=BOB)
    await telegram_sim.wait_for_bot_message(GROUP, lambda m: f"No entry {entry}" in m.text)
    assert (await memory_store(store).memory_counts())["chat"] == 1  # still there


async def test_a_scheduled_run_in_a_group_sees_the_groups_memory_not_its_creators(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    telegram_sim.add_group(GROUP)
    memory = memory_store(store)
    await memory.add_memory(f"person:telegram:{ALICE.id}", FACT)
    await memory.add_memory(f"chat:telegram:group:{GROUP}", "The group meets on Fridays")
    model_server.script(reply_text("Reminder sent."))
    run = await gateway(memory=True)
    clock = ManualClock()
    clock.now_s = datetime(2027, 1, 15, 8, 0, tzinfo=ZoneInfo("UTC")).timestamp()
    section = ScheduleSection(enabled=True)
    feature = ScheduleFeature(run.service, section, clock=clock.now, sleep=clock.sleep, owner="t")
    await feature.start()
    try:
        await telegram_sim.user_says(GROUP, "/every 1h remind us", user=ALICE)
        await telegram_sim.wait_for_bot_message(GROUP, lambda m: "⏰ Job" in (m.text or ""))
        await clock.advance(3600)
        await telegram_sim.wait_for_bot_message(GROUP, lambda m: m.text == "Reminder sent.")
        await feature.scheduler.drain()
    finally:
        await feature.aclose()
    [request] = model_server.requests
    assert "The group meets on Fridays" in system_of(model_server, 0)
    assert FACT not in json.dumps(request.messages)
