"""End to end: a restart between fetching a message and answering it loses nothing and
answers exactly once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from adapters.clock import MONOTONIC
from core.store.sqlite import SqliteStore
from tests.platform_sim.base import SimError
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_hang, reply_text
from tests.telegram.harness import Gateway, GatewayFactory, GatewaySetup, replies

ANSWER = "Here is the answer, after the restart."


async def answered_once_after_restart(
    gateway: GatewayFactory, sim: TelegramSim, models: ScriptedModelServer, store: SqliteStore
) -> None:
    second_run = await gateway()
    await sim.wait_for_bot_message(ALICE.id, lambda m: m.text == ANSWER)
    await second_run.idle(f"telegram:dm:{ALICE.id}")
    await second_run.adapter.drain()
    assert [m.text for m in sim.bot_messages(ALICE.id)] == [ANSWER]
    replayed = models.requests[1].messages
    assert replayed[-1] == {"role": "user", "content": "what is 6 x 7?"}
    assert [m for m in replayed if m["role"] == "user"] == [replayed[-1]]  # once, not twice
    assert await store.unfinished_inbound("telegram") == []


async def test_restart_between_fetch_and_reply_loses_nothing_and_answers_once(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    model_server.script(reply_hang(reply_text("lost in the restart")), reply_text(ANSWER))
    first_run = await gateway()
    said = await telegram_sim.user_says(ALICE.id, "what is 6 x 7?")
    await model_server.wait_for_requests(1)  # fetched, stored, the turn is thinking
    await first_run.stop()
    record = await store.get_inbound("telegram", said.event_id or "")
    assert record is not None and record.state == "processing"
    await answered_once_after_restart(gateway, telegram_sim, model_server, store)


async def test_crash_between_fetch_and_reply_loses_nothing_and_answers_once(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    model_server.script(reply_hang(reply_text("lost in the crash")), reply_text(ANSWER))
    first_run = await gateway()
    said = await telegram_sim.user_says(ALICE.id, "what is 6 x 7?")
    await model_server.wait_for_requests(1)
    await first_run.adapter.stop()  # the process dies: nothing more is received or marked
    first_run.stopping = True
    await first_run.stop()
    update = next(u for u in telegram_sim.updates if u.update_id == int(said.event_id or 0))
    update.confirmed_at = None  # and Telegram never saw the confirming getUpdates
    await answered_once_after_restart(gateway, telegram_sim, model_server, store)
    assert update.deliveries >= 2 and update.confirmed_at is not None


async def test_a_reply_cut_off_by_shutdown_is_sent_after_the_restart_exactly_once(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    model_server.script(reply_text(ANSWER), reply_text(ANSWER))
    telegram_sim.fail_next("sendMessage", SimError.rate_limit(50), times=20)
    first_run = await gateway(clock=MONOTONIC)  # a test clock would skip the 50 s wait
    said = await telegram_sim.user_says(ALICE.id, "what is 6 x 7?")
    await telegram_sim.wait_for(lambda: telegram_sim.calls_to("sendMessage"))
    await first_run.stop(grace=0.5)  # the turn completed, but its reply never went out
    assert telegram_sim.bot_messages(ALICE.id) == []
    record = await store.get_inbound("telegram", said.event_id or "")
    assert record is not None and record.state != "done"
    while telegram_sim.take_fault("sendMessage") is not None:
        pass  # the flood is over
    second_run = await gateway()
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == ANSWER)
    await second_run.idle(f"telegram:dm:{ALICE.id}")
    await second_run.adapter.drain()
    assert [m.text for m in telegram_sim.bot_messages(ALICE.id)] == [ANSWER]
    assert await store.unfinished_inbound("telegram") == []


class WatchedStore:
    """The real store, telling who waits when an inbound update changes state."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner
        self.states: dict[str, str] = {}
        self.changed = asyncio.Condition()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def set_inbound_state(self, platform: str, update_id: str, state: Any) -> None:
        await self.inner.set_inbound_state(platform, update_id, state)
        async with self.changed:
            self.states[update_id] = state
            self.changed.notify_all()

    async def wait_state(self, update_id: str, state: str) -> None:
        async with asyncio.timeout(5), self.changed:
            await self.changed.wait_for(lambda: self.states.get(update_id) == state)


async def test_a_message_answered_before_a_restart_is_not_answered_again(
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
    gateway: GatewayFactory,
    tmp_path: Path,
) -> None:
    answer_a = asyncio.Event()
    model_server.script(
        reply_hang(reply_text("Answer A."), until=answer_a),
        reply_hang(reply_text("B, lost in the restart")),
        reply_text("Answer B."),
    )
    watched = WatchedStore(store)
    workspace = tmp_path / "first-run"
    workspace.mkdir()
    first_run = Gateway(telegram_sim, model_server, watched, workspace, GatewaySetup())  # type: ignore[arg-type]
    try:
        await first_run.start()
        said_a = await telegram_sim.user_says(ALICE.id, "question A")
        await model_server.wait_for_requests(1)
        await telegram_sim.user_says(ALICE.id, "question B")
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text.startswith("⏳"))
        answer_a.set()
        await model_server.wait_for_requests(2)  # A answered; B's turn is thinking
        await watched.wait_state(said_a.event_id or "", "done")
    finally:
        await first_run.stop()
    second_run = await gateway()
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Answer B.")
    await second_run.idle(f"telegram:dm:{ALICE.id}")
    await second_run.adapter.drain()
    assert len(replies(telegram_sim, ALICE.id, "Answer A.")) == 1
    assert len(replies(telegram_sim, ALICE.id, "Answer B.")) == 1
    asked = [r.messages[-1]["content"] for r in model_server.requests]
    assert asked == ["question A", "question B", "question B"]
    replayed = [m["content"] for m in model_server.requests[2].messages if m["role"] == "user"]
    assert replayed == ["question A", "question B"]
    assert await store.unfinished_inbound("telegram") == []
