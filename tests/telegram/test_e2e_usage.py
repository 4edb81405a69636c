"""Usage and quotas end to end on Telegram (README "Usage and quotas"): each model call's
row carries the scripted server's usage exactly, the sender and the chat; a person at the
daily quota gets the quota reply and the model server receives no request, while another
person is answered."""

from __future__ import annotations

from core.store.sqlite import SqliteStore
from core.store.usage import UsageBook, UsageRow
from gateway.config.quotas import QuotaLimits, QuotasSection
from gateway.control.usage import UsageFeature
from tests.platform_sim.telegram_sim import ALICE, BOB, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call
from tests.telegram.harness import GatewayFactory

GROUP = -100777
AT = 1_800_000_000.0  # 2027-01-15 08:00 UTC


def feature(store: SqliteStore, quotas: QuotasSection | None = None) -> UsageFeature:
    return UsageFeature(UsageBook(store), {}, quotas or QuotasSection(), clock=lambda: AT)


def figures(row: UsageRow) -> tuple[object, ...]:
    return (row.person, row.chat, row.prompt_tokens, row.cached_tokens, row.completion_tokens,
            row.estimated, row.model)  # fmt: skip


async def test_usage_rows_match_the_servers_usage_with_person_and_chat(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    model_server.script(
        reply_tool_call("terminal", {"command": "true"}, usage=(1201, 17), cached_tokens=1024),
        reply_text("done, Alice", usage=(1290, 9), cached_tokens=1200),
        reply_text("hello Bob", usage=(803, 5)),
    )
    run = await gateway(usage=feature(store))
    await telegram_sim.user_says(ALICE.id, "run true")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "done, Alice" in m.text)
    telegram_sim.add_group(GROUP)
    await telegram_sim.user_says(GROUP, "@test_bot hi", user=BOB)
    await telegram_sim.wait_for_bot_message(GROUP, lambda m: "hello Bob" in m.text)
    await run.idle(f"telegram:group:{GROUP}:{BOB.id}")
    rows = await UsageBook(store).rows()
    alice, bob = f"telegram:{ALICE.id}", f"telegram:{BOB.id}"
    assert [figures(r) for r in rows] == [
        (alice, f"telegram:dm:{ALICE.id}", 1201, 1024, 17, False, "scripted"),
        (alice, f"telegram:dm:{ALICE.id}", 1290, 1200, 9, False, "scripted"),
        (bob, f"telegram:group:{GROUP}", 803, 0, 5, False, "scripted"),
    ]
    assert rows[0].turn_id == rows[1].turn_id != rows[2].turn_id
    assert {r.at for r in rows} == {AT}


async def test_a_person_at_the_daily_quota_gets_the_reply_and_no_model_request(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    book = UsageBook(store)
    await book.add(UsageRow(
        at=AT - 3600, person=f"telegram:{ALICE.id}", chat=f"telegram:dm:{ALICE.id}",
        profile="default", model="scripted", session_key=f"telegram:dm:{ALICE.id}",
        turn_id="earlier", prompt_tokens=900, cached_tokens=0, completion_tokens=100,
        estimated=False, cost=None,
    ))  # fmt: skip
    quotas = QuotasSection(person=QuotaLimits(daily_tokens=1000))
    model_server.script(reply_text("hello Bob", usage=(10, 2)))
    run = await gateway(usage=feature(store, quotas))
    await telegram_sim.user_says(ALICE.id, "one more question")
    refused = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "quota" in m.text)
    assert refused.text == (
        "⛔ You have reached your daily quota of 1,000 tokens (1,000 tokens used). "
        "It resets at 2027-01-16 00:00 UTC."
    )
    await run.idle(f"telegram:dm:{ALICE.id}")
    assert model_server.requests == []
    await telegram_sim.user_says(BOB.id, "hi")
    await telegram_sim.wait_for_bot_message(BOB.id, lambda m: "hello Bob" in m.text)
    assert len(model_server.requests) == 1
    rows = await book.rows()
    assert [(r.turn_id == "earlier", r.person) for r in rows] == [
        (True, f"telegram:{ALICE.id}"), (False, f"telegram:{BOB.id}"),
    ]  # fmt: skip
