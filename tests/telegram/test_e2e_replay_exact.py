"""End to end: a replayed update whose answer is stored is answered from the store — the
model is never called again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from core.store.sqlite import SqliteStore
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_text
from tests.telegram.harness import Gateway, GatewayFactory, GatewaySetup

QUESTION = "what is 6 x 7?"
ANSWER = "42, and only once from the model."


class DiesBeforeDone:
    """The real store; the process "dies" the moment an update is to be marked done: that
    write never happens (it waits until the run is torn down)."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner
        self.reached = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def set_inbound_state(self, platform: str, update_id: str, state: Any) -> None:
        if state == "done":
            self.reached.set()
            await asyncio.Event().wait()  # killed here: cancelled by the teardown
        await self.inner.set_inbound_state(platform, update_id, state)


async def crash(run: Gateway, sim: TelegramSim, update_id: str) -> None:
    """Tear the run down as a kill would leave it: nothing more received or marked, and
    Telegram never saw the confirming getUpdates."""
    await run.adapter.stop()
    run.stopping = True
    await run.stop(grace=0)  # a kill waits for nothing
    update = next(u for u in sim.updates if u.update_id == int(update_id))
    update.confirmed_at = None


async def answered_again_from_the_store(
    gateway: GatewayFactory, sim: TelegramSim, models: ScriptedModelServer, store: SqliteStore
) -> None:
    second_run = await gateway()
    await second_run.adapter.drain()
    await second_run.idle(f"telegram:dm:{ALICE.id}")
    assert [m.text for m in sim.bot_messages(ALICE.id)] == [ANSWER]  # the outbox: sent once
    assert len(models.requests) == 1  # the first run's call; the replay made none
    assert await store.unfinished_inbound("telegram") == []


async def test_killed_between_reply_sent_and_update_done_never_sends_the_answer_twice(
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
    gateway: GatewayFactory,
    tmp_path: Path,
) -> None:
    model_server.script(reply_text(ANSWER))
    dying = DiesBeforeDone(store)
    workspace = tmp_path / "first-run"
    workspace.mkdir()
    first_run = Gateway(telegram_sim, model_server, dying, workspace, GatewaySetup())  # type: ignore[arg-type]
    try:
        await first_run.start()
        said = await telegram_sim.user_says(ALICE.id, QUESTION)
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == ANSWER)
        await asyncio.wait_for(dying.reached.wait(), 5)  # reply sent, "done" not written
        await crash(first_run, telegram_sim, said.event_id or "")
    finally:
        await first_run.stop()  # does nothing after the crash; a failed test still stops
    record = await store.get_inbound("telegram", said.event_id or "")
    assert record is not None and record.state == "processing"

    await answered_again_from_the_store(gateway, telegram_sim, model_server, store)
