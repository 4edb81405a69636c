"""Discord's slash-command syncs are recorded in the store's own ``command_syncs`` table:
the inbound queue holds only what users sent, and a changed set is synced again."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from core.store.sqlite import SqliteStore
from tests.discord.conftest import GatewayFactory
from tests.platform_sim.discord_sim import DiscordSim


def inbound_rows(path: Path) -> list[tuple[object, ...]]:
    """The inbound queue, read with plain sqlite3 beside the store."""
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT platform, update_id FROM inbound").fetchall()


async def test_a_sync_is_recorded_outside_the_inbound_queue(
    gateway: GatewayFactory, discord_sim: DiscordSim, store: SqliteStore, tmp_path: Path
) -> None:
    run = await gateway()
    assert run.adapter.syncs == 1 and len(discord_sim.calls_to("put_commands")) == 1
    assert await store.synced_commands("discord", "global") is not None
    assert inbound_rows(tmp_path / "store.db") == []


async def test_a_changed_command_set_is_synced_again(
    gateway: GatewayFactory, discord_sim: DiscordSim, store: SqliteStore
) -> None:
    await store.set_synced_commands("discord", "global", "an older set")
    run = await gateway()
    assert run.adapter.syncs == 1 and len(discord_sim.calls_to("put_commands")) == 1
    assert await store.synced_commands("discord", "global") not in (None, "an older set")
