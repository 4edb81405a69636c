"""``commonos run`` killed with SIGKILL while a reply chunk's send is in flight, then run
again on the same home (store file included): the exactly-once tests of each platform.

The simulator holds the answer to the reply's send (``SimServer.hold_next``: the platform
has the message, the gateway has not heard so); the test kills the process, releases the
answer into the dead connection and starts a second process, which replays the unfinished
inbound item, finds the reply stored (no model call) and delivers the chunk again.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from tests.platform_sim.base import Hold
from tests.support.model_server import ScriptedModelServer
from tests.support.polling import until
from tests.test_run_telegram import READY, TIMEOUT, RunningGateway, gateway_process

STORE_FILE = "commonos.db"


def write_config(home: Path, models: ScriptedModelServer, platform: str) -> None:
    """A config with the scripted model server and one platform section (TOML text)."""
    (home / "config.toml").write_text(
        f"""
[gateway]
log_level = "INFO"

[web]
enabled = false

[model]
provider = "openai"
base_url = "{models.url}"
api_key = "test"
model = "scripted"

{platform}
"""
    )


async def kill_in_flight(home: Path, hold: Hold, ask: Callable[[], Awaitable[object]]) -> None:
    """Start the gateway, ``await ask()`` (the user's message), wait until the reply's send
    is held, then SIGKILL the process and release the answer into the dead connection."""
    async with gateway_process(home) as first:
        await first.wait_for_line(READY)
        await ask()
        await asyncio.wait_for(hold.reached.wait(), TIMEOUT)
        first.process.kill()
        assert await first.process.wait() == -9
    hold.release()


@contextlib.asynccontextmanager
async def restarted(home: Path) -> AsyncIterator[RunningGateway]:
    """The second run, ready."""
    async with gateway_process(home) as second:
        await second.wait_for_line(READY)
        yield second


def outbox(home: Path) -> list[tuple[str | None, bool]]:
    """Each stored chunk's message id and whether a send of it was started, in order."""
    rows = _read(home, "SELECT message_id, started_at FROM outbox ORDER BY created_at, chunk")
    return [(row[0], row[1] is not None) for row in rows]


def unfinished(home: Path, platform: str) -> int:
    sql = "SELECT COUNT(*) FROM inbound WHERE platform = ? AND state IN ('pending', 'processing')"
    return int(_read(home, sql, (platform,))[0][0])


async def settled(home: Path, platform: str) -> None:
    """Until no inbound item of ``platform`` is unfinished (the replay delivered and marked
    its reply), read from the store file beside the running process."""
    await until(lambda: unfinished(home, platform) == 0, TIMEOUT)


def _read(home: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(home / STORE_FILE, timeout=TIMEOUT)) as db:
        return list(db.execute(sql, params))
