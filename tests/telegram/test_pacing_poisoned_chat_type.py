"""A chat's kind and pacing come only from validated updates: an update whose ``chat.type``
is not one the Bot API defines is a dead letter and changes nothing about its chat.

The adapter declares a group budget of one call per hour and no other limit, so a chat
paced as a group gets one call and then waits: no test waits on it — a DM's replies
arriving at all shows the DM was not paced as a group, and the group control test sees
its second call waiting in the scheduler. The budget is paced on the real clock (a test
clock would skip the hour and hide a DM wrongly paced as a group)."""

from __future__ import annotations

import time
from typing import Any

from adapters.base import RateLimit
from adapters.clock import MONOTONIC
from core.store.sqlite import SqliteStore
from gateway.outbound.scheduler import OutboundScheduler
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_text
from tests.support.polling import until
from tests.telegram.harness import Gateway, GatewayFactory

ONE_PER_HOUR = {"group_limit": RateLimit(1, 3600.0), "chat_limit": None, "bot_limit": None}
GROUP = -100600
REPLIES = 4
POISONED_TYPES: list[Any] = [
    ["supergroup"],
    {"type": "group"},
    "supergroup ",
    "supergroup\u200b",
    "\u0455upergroup",  # a Cyrillic "s"
    "SUPERGROUP",
]


def poisoned_dm(chat_type: Any) -> dict[str, Any]:
    """A message in Alice's DM whose ``chat.type`` is ``chat_type``."""
    return {
        "message": {
            "message_id": 700,
            "date": int(time.time()),
            "chat": {"id": ALICE.id, "type": chat_type, "first_name": "Alice"},
            "from": ALICE.to_json(),
            "text": "poisoned",
        }
    }


def scheduler_of(run: Gateway) -> OutboundScheduler:
    outbound = run.service.directory.outbound("telegram")
    assert outbound is not None and outbound.scheduler is not None
    return outbound.scheduler


async def ask(sim: TelegramSim, chat: int, text: str, answer: str) -> None:
    await sim.user_says(chat, text, user=ALICE)
    await sim.wait_for_bot_message(chat, lambda m: m.text == answer, timeout=10)


async def test_a_dm_after_poisoned_chat_types_is_still_paced_as_a_dm(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    model_server.script(*[reply_text(f"answer {n}") for n in range(REPLIES + 1)])
    run = await gateway(telegram=ONE_PER_HOUR, clock=MONOTONIC)
    await ask(telegram_sim, ALICE.id, "before", "answer 0")
    poisons = [await telegram_sim.push_raw(poisoned_dm(kind)) for kind in POISONED_TYPES]
    ids = [p.update_id for p in poisons]
    await telegram_sim.wait_for(lambda: all(telegram_sim.is_confirmed(i) for i in ids))

    for n in range(1, REPLIES + 1):  # as a group, the second call of these would wait 1 h
        await ask(telegram_sim, ALICE.id, f"after {n}", f"answer {n}")

    letters = await store.list_dead_letters("telegram")
    assert sorted(d.item_id for d in letters) == sorted(str(p.update_id) for p in poisons)
    assert all("chat.type" in d.error and "poisoned" in d.raw for d in letters)
    assert [r.last_user_text for r in model_server.requests] == [
        "before",
        *[f"after {n}" for n in range(1, REPLIES + 1)],
    ]
    assert scheduler_of(run).waiting == 0
    assert all(m.text != "poisoned" for m in telegram_sim.bot_messages(ALICE.id))


async def test_a_group_with_the_same_budget_is_paced_as_a_group(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    """The control: the budget above binds in a real group (its second reply waits)."""
    model_server.script(reply_text("group answer 1"), reply_text("group answer 2"))
    telegram_sim.add_group(GROUP)
    run = await gateway(telegram=ONE_PER_HOUR, clock=MONOTONIC)
    scheduler = scheduler_of(run)
    await ask(telegram_sim, GROUP, "@test_bot one", "group answer 1")
    await telegram_sim.user_says(GROUP, "@test_bot two", user=ALICE)
    await model_server.wait_for_requests(2, timeout=10)
    await until(lambda: scheduler.waiting > 0)
    assert scheduler.stats.calls == 1
    assert [m.text for m in telegram_sim.bot_messages(GROUP)] == ["group answer 1"]
    await scheduler.aclose()  # the waiting reply fails now, not after the shutdown grace
