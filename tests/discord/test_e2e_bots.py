"""Issue 22 point 5, end to end: two gateway bots in one Discord channel (two gateways, each
with its own token, home and database, on one simulator; every message reaches both bots'
sessions, a bot's with ``author.bot``), real discord.py, composed by the wiring from
``[discord]`` keys, the scripted model server (README.md, "Bots in chats").

With the defaults neither answers the other; with ``allow_bots`` naming each other the
bot guard stops them within N exchanges — one notice each, then silence — while a person
in the same channel is still answered."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from core.store.sqlite import SqliteStore, open_store
from tests.discord.conftest import beating
from tests.discord.harness import Gateway
from tests.platform_sim.discord_sim import ALICE, GENERAL, DiscordSim
from tests.support.model_server import ScriptedModelServer, reply_text

OTHER_TOKEN, OTHER_ID = "OTHER.DISCORD.TOKEN", "801"
N = 3
NOTICE = "Too many exchanges with the bot"
QUIET_ROUNDS = 3
Start = Callable[..., Any]


@pytest.fixture
async def two_gateways(
    discord_sim: DiscordSim, model_server: ScriptedModelServer, tmp_path: Path
) -> AsyncIterator[Start]:
    """``start(a={...}, b={...})``: the gateways of test_bot and other_bot (``[discord]``
    keys for each)."""
    model_server.default = reply_text("ok")
    peer = discord_sim.add_bot(OTHER_TOKEN, OTHER_ID, "other_bot")
    runs: list[Gateway] = []
    stores: list[SqliteStore] = []

    async def start(**keys: dict[str, Any]) -> tuple[Gateway, Gateway]:
        for name, sim in (("a", discord_sim), ("b", peer)):
            store = await open_store(tmp_path / f"{name}.db")
            stores.append(store)
            home = tmp_path / name
            home.mkdir()
            run = Gateway(
                sim, model_server, store, home, progress={"mode": "off"},
                allowed_users=[ALICE.id], require_mention=False, thread_per_conversation=False,
                **keys.get(name, {}),
            )  # fmt: skip
            runs.append(await run.start())
        return runs[0], runs[1]

    try:
        yield start
    finally:
        for run in reversed(runs):
            await run.stop()
        for store in stores:
            await store.close()
        assert beating() == [], "a discord.py heartbeat thread was left running"


async def quiet(sim: DiscordSim, *gateways: Gateway) -> None:
    """Until nothing is in flight, :data:`QUIET_ROUNDS` times in a row: every frame read by
    both clients (a heartbeat barrier), every message routed, no turn running."""
    calm = 0
    for _ in range(500):
        await sim.gateway.barrier()
        busy = [g for g in gateways if g.service.dispatcher.worker_count]
        unfinished = [g for g in gateways if await g.store.unfinished_inbound("discord")]
        calm = 0 if busy or unfinished else calm + 1
        if calm == QUIET_ROUNDS:
            return
    raise TimeoutError("the two gateways never went quiet")


def said(gw: Gateway) -> list[str]:
    return [m.text for m in gw.sim.bot_messages(GENERAL, bot=gw.sim.bot)]


async def test_with_the_defaults_neither_bot_answers_the_other(
    two_gateways: Start, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    first, second = await two_gateways()
    await discord_sim.user_says(GENERAL, "hello both", user=ALICE)
    await discord_sim.wait_for(lambda: said(first) and said(second))
    await quiet(discord_sim, first, second)
    assert (said(first), said(second)) == (["ok"], ["ok"])
    assert len(model_server.requests) == 2  # Alice's message, once per gateway


async def test_allowed_bots_are_stopped_by_the_guard_within_n_exchanges(
    two_gateways: Start, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    pace = {"bot_exchanges_per_minute": N, "bot_mute_seconds": 600}
    first, second = await two_gateways(
        a={"allow_bots": [OTHER_ID], **pace}, b={"allow_bots": [discord_sim.bot.id], **pace}
    )
    await discord_sim.user_says(GENERAL, "hello both", user=ALICE)
    await discord_sim.wait_for(
        lambda: all(any(NOTICE in t for t in said(g)) for g in (first, second)), timeout=10
    )
    await quiet(discord_sim, first, second)
    for gw in (first, second):
        texts = said(gw)
        assert len([t for t in texts if NOTICE in t]) == 1, texts  # one notice each
        assert texts.count("ok") <= 1 + N, texts  # Alice's answer and at most N to the bot
    assert len(model_server.requests) <= 2 + 2 * N
    before = (len(said(first)), len(said(second)))
    await discord_sim.user_says(GENERAL, "still there?", user=ALICE)  # a person is answered
    await discord_sim.wait_for(
        lambda: len(said(first)) > before[0] and len(said(second)) > before[1]
    )
    await quiet(discord_sim, first, second)
    assert (len(said(first)), len(said(second))) == (before[0] + 1, before[1] + 1)
    assert said(first)[-1] == said(second)[-1] == "ok"  # then silence between the bots
