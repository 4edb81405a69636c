"""Members on a real PostgreSQL server: several Members objects stand for several processes."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator

import asyncpg
import pytest

from gateway.cluster.leases import Leases
from gateway.cluster.members import Members
from tests.cluster.pg_pool import cluster_pool

TTL = 30.0
A = "a/00000001"
B = "b/00000002"
C = "c/00000003"


@pytest.fixture
async def pool(pg_url: str) -> AsyncIterator[asyncpg.Pool]:
    async with cluster_pool(pg_url) as opened:
        yield opened


async def _stale(pool: asyncpg.Pool, process_id: str) -> None:
    await pool.execute(
        "UPDATE processes SET seen_at = clock_timestamp() - interval '5 minutes' WHERE id = $1",
        process_id,
    )


async def test_join_registers_this_process(pool: asyncpg.Pool) -> None:
    a = Members(pool, A, "alpha", TTL)
    await a.join("http://127.0.0.1:8080")
    [member] = await a.live()
    assert (member.id, member.name, member.host, member.pid) == (
        A,
        "alpha",
        socket.gethostname(),
        os.getpid(),
    )
    assert member.web_url == "http://127.0.0.1:8080"
    assert member.bots == () and member.sessions == 0
    assert member.seen_at >= member.started_at > 0


async def test_beat_moves_seen_at_and_revives_a_stale_member(pool: asyncpg.Pool) -> None:
    a = Members(pool, A, "alpha", TTL)
    await a.join()
    await _stale(pool, A)
    assert await a.live() == []
    await a.beat()
    assert [member.id for member in await a.live()] == [A]


async def test_live_excludes_stopped_and_stale_everyone_includes_them(
    pool: asyncpg.Pool,
) -> None:
    a, b, c = (Members(pool, pid, pid[0], TTL) for pid in (A, B, C))
    for member in (a, b, c):
        await member.join()
    await b.leave()
    await _stale(pool, C)
    assert [member.id for member in await a.live()] == [A]
    assert {member.id for member in await a.everyone()} == {A, B, C}
    assert {member.id for member in await a.everyone(since=60)} == {A, B}


async def test_leave_ends_every_lease_at_once(pool: asyncpg.Pool) -> None:
    members = Members(pool, A, "alpha", TTL)
    await members.join()
    leases = Leases(pool, A, TTL)
    await leases.acquire("bot:telegram:x")
    await leases.acquire("session:web:1")
    await members.leave()
    for name in ("bot:telegram:x", "session:web:1"):
        holder = await leases.holder(name)
        assert holder is not None and not holder.live
    assert (await Leases(pool, B, TTL).acquire("bot:telegram:x")) is not None


async def test_members_count_their_live_bots_and_sessions(pool: asyncpg.Pool) -> None:
    a, b = Members(pool, A, "alpha", TTL), Members(pool, B, "beta", TTL)
    await a.join()
    await b.join()
    leases = Leases(pool, A, TTL)
    await leases.acquire("bot:telegram:x")
    await leases.acquire("bot:discord:y")
    await leases.acquire("session:web:1")
    ended = await leases.acquire("session:web:2")
    assert ended is not None
    await leases.release(ended)
    by_id = {member.id: member for member in await a.live()}
    assert by_id[A].bots == ("bot:discord:y", "bot:telegram:x")
    assert by_id[A].sessions == 1
    assert by_id[B].bots == () and by_id[B].sessions == 0


async def test_least_busy_picks_the_fewest_live_sessions(pool: asyncpg.Pool) -> None:
    a, b = Members(pool, A, "alpha", TTL), Members(pool, B, "beta", TTL)
    await a.join()
    await b.join()
    await Leases(pool, A, TTL).acquire("session:web:1")
    assert await a.least_busy() == B
    await Leases(pool, B, TTL).acquire("session:web:2")
    assert await a.least_busy() == A
    assert await b.least_busy() == B


async def test_least_busy_ignores_stopped_and_stale_members(pool: asyncpg.Pool) -> None:
    a, b, c = (Members(pool, pid, pid[0], TTL) for pid in (A, B, C))
    for member in (a, b, c):
        await member.join()
    await Leases(pool, A, TTL).acquire("session:web:1")
    await b.leave()
    await _stale(pool, C)
    assert await a.least_busy() == A


async def test_least_busy_before_joining_is_this_process(pool: asyncpg.Pool) -> None:
    assert await Members(pool, A, "alpha", TTL).least_busy() == A
