"""Issue 22 point 5, end to end: two gateway bots in one Telegram group (two gateways, each
with its own token and database, on one simulator; each bot's group messages reach the
other as updates from a bot), real PTB, the scripted model server (README.md, "Bots in
chats").

With the defaults neither answers the other; with ``allow_bots`` naming each other the
bot guard stops them within N exchanges — one notice each, then silence — while a person
in the same group is still answered; a bot never reads its own messages."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.store.sqlite import SqliteStore, open_store
from gateway.control.bot_guard import BotLimits
from gateway.turns.progress import ProgressConfig
from tests.platform_sim.telegram_sim import ALICE, TOKEN, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_text
from tests.support.polling import POLL_SECONDS
from tests.telegram.harness import Gateway, GatewaySetup

GROUP = -100777
OTHER_TOKEN = "654321:OTHER-TOKEN"
FIRST_ID, OTHER_ID = (token.split(":")[0] for token in (TOKEN, OTHER_TOKEN))
N = 3
NOTICE = "Too many exchanges with the bot"


@pytest.fixture
async def two_gateways(
    telegram_sim: TelegramSim, model_server: ScriptedModelServer, tmp_path: Path
) -> AsyncIterator[Callable[..., Any]]:
    """``start(access_a, access_b)``: the gateways of test_bot and other_bot."""
    model_server.default = reply_text("ok")
    telegram_sim.add_group(GROUP)
    peer = telegram_sim.add_bot(OTHER_TOKEN, "other_bot")
    runs: list[Gateway] = []
    stores: list[SqliteStore] = []

    async def start(**access: dict[str, Any]) -> tuple[Gateway, Gateway, TelegramSim]:
        for name, sim in (("a", telegram_sim), ("b", peer)):
            store = await open_store(tmp_path / f"{name}.db")
            stores.append(store)
            workspace = tmp_path / f"workspace-{name}"
            workspace.mkdir()
            setup = replace(
                GatewaySetup(),
                allowed_users=frozenset({str(ALICE.id)}),
                progress=ProgressConfig(mode="off"),
                access={"require_mention": False, **access.get(name, {})},
            )
            runs.append(await Gateway(sim, model_server, store, workspace, setup).start())
        return runs[0], runs[1], peer

    try:
        yield start
    finally:
        for run in runs:
            await run.stop()
        for store in stores:
            await store.close()


async def quiet(*gateways: Gateway, timeout: float = 10.0) -> None:
    """Until nothing is in flight: every update confirmed and routed, no turn running."""

    async def still() -> bool:
        for gw in gateways:
            if gw.sim.pending() or gw.service.dispatcher.worker_count:
                return False
            if await gw.store.unfinished_inbound("telegram"):
                return False
        return True

    for _ in range(int(timeout / POLL_SECONDS)):
        if await still():
            return
        await asyncio.sleep(POLL_SECONDS)
    raise TimeoutError("the two gateways never went quiet")


def said(gw: Gateway) -> list[str]:
    return [m.text for m in gw.sim.bot_messages(GROUP, bot=gw.sim.bot)]


async def test_with_the_defaults_neither_bot_answers_the_other(
    two_gateways: Callable[..., Any], model_server: ScriptedModelServer
) -> None:
    first, second, _ = await two_gateways()
    await first.sim.user_says(GROUP, "hello both", user=ALICE)
    await first.sim.wait_for(lambda: said(first) and said(second))
    await quiet(first, second)
    assert (said(first), said(second)) == (["ok"], ["ok"])
    assert len(model_server.requests) == 2  # Alice's message, once per gateway


async def test_allowed_bots_are_stopped_by_the_guard_within_n_exchanges(
    two_gateways: Callable[..., Any], model_server: ScriptedModelServer
) -> None:
    limits = BotLimits(exchanges_per_minute=N, mute_seconds=600)
    first, second, _ = await two_gateways(
        a={"allow_bots": frozenset({OTHER_ID}), "bot_limits": limits},
        b={"allow_bots": frozenset({FIRST_ID}), "bot_limits": limits},
    )
    await first.sim.user_says(GROUP, "hello both", user=ALICE)
    await first.sim.wait_for(
        lambda: all(any(NOTICE in t for t in said(g)) for g in (first, second))
    )
    await quiet(first, second)
    for gw in (first, second):
        texts = said(gw)
        assert len([t for t in texts if NOTICE in t]) == 1, texts  # one notice each
        assert texts.count("ok") <= 1 + N, texts  # Alice's answer and at most N to the bot
    assert len(model_server.requests) <= 2 + 2 * N
    before = (len(said(first)), len(said(second)))
    await first.sim.user_says(GROUP, "still there?", user=ALICE)  # a person is still answered
    await first.sim.wait_for(lambda: len(said(first)) > before[0] and len(said(second)) > before[1])
    await quiet(first, second)
    assert (len(said(first)), len(said(second))) == (before[0] + 1, before[1] + 1)
    assert said(first)[-1] == said(second)[-1] == "ok"  # then silence between the bots
    assert len(model_server.requests) <= 4 + 2 * N


async def test_a_bot_never_reads_its_own_messages_even_when_it_names_itself(
    two_gateways: Callable[..., Any], model_server: ScriptedModelServer
) -> None:
    first, second, _ = await two_gateways(a={"allow_bots": frozenset({FIRST_ID})})
    own = first.sim.new_message(first.sim.chat(GROUP), first.sim.bot, "my own words")
    await first.sim.push_update("message", own)  # as if Telegram echoed it back
    await quiet(first, second)
    assert said(first) == [] and model_server.requests == []
