"""End to end: /stop ends a turn wherever it is, at once; /steer reaches the next request."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO

from core.store.sqlite import SqliteStore
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import (
    ScriptedModelServer,
    reply_hang,
    reply_text,
    reply_tool_call,
)
from tests.telegram.harness import Gateway, GatewayFactory

KEY = f"telegram:dm:{ALICE.id}"


@contextlib.asynccontextmanager
async def tool_gate(workspace: Path) -> AsyncIterator[tuple[str, asyncio.Future[IO[str]]]]:
    """A FIFO a tool blocks on (``cat gate``); the future resolves once the tool has opened
    it — proof the tool is running — with the writing end that lets it finish."""
    path = workspace / "gate"
    os.mkfifo(path)
    opened = asyncio.ensure_future(asyncio.to_thread(open, path, "w"))
    try:
        yield "cat gate", opened
    finally:
        if not opened.done():  # nobody read: open the reading end so the thread can end
            os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        with contextlib.suppress(BrokenPipeError):
            (await opened).close()


async def stop_and_time(run: Gateway, sim: TelegramSim) -> float:
    """Send /stop; seconds until the turn has ended and "Stopped" was answered."""
    started = time.monotonic()
    await sim.user_says(ALICE.id, "/stop")
    await sim.wait_for_bot_message(ALICE.id, lambda m: "Stopped" in m.text)
    await run.idle(KEY)
    return time.monotonic() - started


def stopped_replies(sim: TelegramSim) -> int:
    sends = sim.calls_to("sendMessage")
    return sum("Stopped" in str(c.params.get("text")) and c.status == 200 for c in sends)


async def last_turn_status(store: SqliteStore) -> str:
    session = await store.get_active_session(KEY)
    assert session is not None
    return (await store.list_turns(session.id))[-1].status


async def test_stop_during_a_model_call_ends_the_turn_within_a_second(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    model_server.script(reply_hang(reply_text("never sent")))
    run = await gateway()
    await telegram_sim.user_says(ALICE.id, "think hard")
    [request] = await model_server.wait_for_requests(1)
    assert await stop_and_time(run, telegram_sim) < 1.0
    assert request.closed.is_set()
    assert (stopped_replies(telegram_sim), await last_turn_status(store)) == (1, "interrupted")


async def test_stop_during_a_tool_ends_the_turn_within_a_second(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
    tmp_path: Path,
) -> None:
    async with tool_gate(tmp_path / "workspace") as (command, tool_running):
        model_server.script(reply_tool_call("terminal", {"command": command}))
        run = await gateway()
        await telegram_sim.user_says(ALICE.id, "wait on the gate")
        await asyncio.wait_for(asyncio.shield(tool_running), 5)
        assert await stop_and_time(run, telegram_sim) < 1.0
    assert len(model_server.requests) == 1
    assert (stopped_replies(telegram_sim), await last_turn_status(store)) == (1, "interrupted")


async def test_stop_during_a_pending_approval_ends_the_turn_within_a_second(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:
    model_server.script(reply_tool_call("terminal", {"command": "rm -rf ./build"}))
    run = await gateway()
    await telegram_sim.user_says(ALICE.id, "wipe the build")
    card = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: bool(m.buttons))
    assert await stop_and_time(run, telegram_sim) < 1.0
    await telegram_sim.wait_for(lambda: not card.buttons)
    assert "Cancelled" in card.text
    assert await store.pending_approvals() == []
    assert (stopped_replies(telegram_sim), await last_turn_status(store)) == (1, "interrupted")


async def test_steer_reaches_the_model_in_the_request_after_the_current_tool(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:
    async with tool_gate(tmp_path / "workspace") as (command, tool_running):
        model_server.script(
            reply_tool_call("terminal", {"command": command}), reply_text("Using staging.")
        )
        run = await gateway()
        await telegram_sim.user_says(ALICE.id, "deploy")
        writer = await asyncio.wait_for(asyncio.shield(tool_running), 5)
        await telegram_sim.user_says(ALICE.id, "/steer use the staging database")
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "Steer queued" in m.text)
        assert len(model_server.requests) == 1
        writer.write("tool output\n")
        writer.close()
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Using staging.")
    await run.idle(KEY)
    tool_message = model_server.requests[1].messages[-1]
    assert tool_message["role"] == "tool"
    assert "tool output" in tool_message["content"]
    assert "use the staging database" in tool_message["content"]
