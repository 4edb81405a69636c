"""While the store cannot write (a full disk, a read-only database), each chat hears it
once, the log stays quiet, and every message is answered once storage is back.

The outage is real SQLite behaviour on the store's own connection: ``PRAGMA
max_page_count`` makes the file full ("database or disk is full"), ``PRAGMA query_only``
makes it read-only ("attempt to write a readonly database").
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiosqlite
import pytest

from adapters.inbox import STORAGE_NOTICE
from adapters.telegram import PollSettings
from core.store.sqlite import SqliteStore, open_store
from tests.platform_sim.telegram_sim import ALICE, BOB, TelegramSim
from tests.support.backoff import Ceiling, TestSleep
from tests.support.model_server import ScriptedModelServer, reply_text
from tests.telegram.harness import GatewayFactory, replies

LONG = "x" * 3500  # needs pages of its own: a full file cannot take it
NO_LIMIT = 1_073_741_823


@pytest.fixture
async def connection(tmp_path: Path) -> aiosqlite.Connection:
    """The store's connection, held by the test so it can make the file full or read-only."""
    path = tmp_path / "store.db"
    await (await open_store(path)).close()  # created and migrated
    conn = await aiosqlite.connect(path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    await conn.execute("PRAGMA busy_timeout = 5000")
    await conn.execute("PRAGMA foreign_keys = ON")
    return conn


@pytest.fixture
async def store(connection: aiosqlite.Connection, tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(connection, tmp_path / "store.db")
    try:
        yield opened
    finally:
        await opened.close()


async def fill_the_disk(conn: aiosqlite.Connection) -> Callable[[], Awaitable[None]]:
    await conn.execute("CREATE TABLE filler (data BLOB)")
    await conn.execute("VACUUM")
    pages = (await conn.execute_fetchall("PRAGMA page_count"))[0][0]  # type: ignore[index]
    await conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
        for _ in range(100):
            await conn.execute("INSERT INTO filler VALUES (randomblob(3000))")

    async def free() -> None:
        await conn.execute(f"PRAGMA max_page_count = {NO_LIMIT}")

    return free


async def make_read_only(conn: aiosqlite.Connection) -> Callable[[], Awaitable[None]]:
    await conn.execute("PRAGMA query_only = ON")

    async def writable() -> None:
        await conn.execute("PRAGMA query_only = OFF")

    return writable


OUTAGES = {"disk full": fill_the_disk, "read-only database": make_read_only}


def notices(sim: TelegramSim, chat: int) -> int:
    return len(replies(sim, chat, STORAGE_NOTICE))


@pytest.mark.parametrize("outage", list(OUTAGES))
async def test_a_store_outage_gives_one_notice_per_chat_then_every_message_is_answered_once(
    outage: str,
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    connection: aiosqlite.Connection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    model_server.script(*(reply_text(f"reply-{n}") for n in range(4)))
    sleep = TestSleep()
    poll = PollSettings(
        timeout=1, backoff_initial=0.05, backoff_max=0.2, sleep=sleep, rng=Ceiling()
    )
    run = await gateway(telegram={"poll": poll})
    await telegram_sim.user_says(ALICE.id, "before the outage")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "reply-" in m.text)
    await run.adapter.drain()  # its update is marked done
    restore = await OUTAGES[outage](connection)
    with caplog.at_level(logging.INFO):
        await telegram_sim.user_says(ALICE.id, f"first {LONG}")
        second = await telegram_sim.user_says(ALICE.id, f"second {LONG}")
        await telegram_sim.user_says(BOB.id, f"from bob {LONG}")
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: STORAGE_NOTICE in m.text)
        await telegram_sim.wait_for_bot_message(BOB.id, lambda m: STORAGE_NOTICE in m.text)
        update = next(u for u in telegram_sim.updates if u.update_id == int(second.event_id or 0))
        await telegram_sim.wait_for(lambda: update.deliveries >= 4, timeout=10)
        during, waits = list(caplog.records), list(sleep.waits)
        await restore()
        await telegram_sim.wait_for(lambda: answers(telegram_sim) == (3, 1))
    assert (notices(telegram_sim, ALICE.id), notices(telegram_sim, BOB.id)) == (1, 1)
    asked = sorted(str(r.messages[-1]["content"])[:8] for r in model_server.requests[1:])
    assert asked == ["first xx", "from bob", "second x"]
    assert_quiet_log(during)
    assert waits[:3] == [0.05, 0.1, 0.2] and set(waits[3:]) <= {0.2}  # doubling to the cap
    assert run.adapter.health.state == "up"  # the connection was never the problem


def answers(sim: TelegramSim) -> tuple[int, int]:
    return len(replies(sim, ALICE.id, "reply-")), len(replies(sim, BOB.id, "reply-"))


def assert_quiet_log(records: list[logging.LogRecord]) -> None:
    """One ERROR when the outage began; no per-retry warnings, no tracebacks."""
    loud = [r for r in records if r.levelno >= logging.WARNING and r.name.startswith("adapters")]
    assert [(r.name, r.levelname) for r in loud] == [("adapters.inbox", "ERROR")]
    assert all(r.exc_info is None for r in records)
