"""Leases on a real PostgreSQL server: several Leases objects stand for several processes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from core.approvals import RESTART_BY
from core.store.base import ApprovalCard, ApprovalRecord
from core.store.fencing import Fence
from gateway.cluster.leases import Holder, Leases, stopped_renewing
from tests.cluster.pg_pool import add_running_turn, cluster_pool, expire

TTL = 30.0
A = "a/00000001"
B = "b/00000002"


@pytest.fixture
async def pool(pg_url: str) -> AsyncIterator[asyncpg.Pool]:
    async with cluster_pool(pg_url) as opened:
        yield opened


async def test_free_lease_is_taken_at_epoch_1(pool: asyncpg.Pool) -> None:
    fence = await Leases(pool, A, TTL).acquire("bot:telegram:abc")
    assert fence == Fence("bot:telegram:abc", A, 1)


async def test_another_process_live_lease_is_not_taken(pool: asyncpg.Pool) -> None:
    a, b = Leases(pool, A, TTL), Leases(pool, B, TTL)
    await a.acquire("bot:x")
    assert await b.acquire("bot:x") is None
    assert b.fence_of("bot:x") is None
    assert await b.holder("bot:x") == Holder("bot:x", A, 1, True)


async def test_expired_lease_is_taken_with_next_epoch(pool: asyncpg.Pool) -> None:
    a, b = Leases(pool, A, TTL), Leases(pool, B, TTL)
    await a.acquire("bot:x")
    await expire(pool, "bot:x")
    assert await b.acquire("bot:x") == Fence("bot:x", B, 2)


async def test_own_live_lease_is_renewed_at_the_same_epoch(pool: asyncpg.Pool) -> None:
    a = Leases(pool, A, TTL)
    await a.acquire("bot:x")
    before = await pool.fetchval("SELECT expires_at FROM leases WHERE name = 'bot:x'")
    assert await a.acquire("bot:x") == Fence("bot:x", A, 1)
    after = await pool.fetchval("SELECT expires_at FROM leases WHERE name = 'bot:x'")
    assert after > before


async def test_two_concurrent_acquirers_of_a_free_lease_one_wins(pool: asyncpg.Pool) -> None:
    a, b = Leases(pool, A, TTL), Leases(pool, B, TTL)
    for n in range(30):
        name = f"bot:race:{n}"
        won = await asyncio.gather(a.acquire(name), b.acquire(name))
        winners = [fence for fence in won if fence is not None]
        assert len(winners) == 1, won
        assert winners[0].epoch == 1
        holder = await a.holder(name)
        assert holder is not None and holder.owner == winners[0].owner


async def test_two_concurrent_takers_of_an_expired_lease_one_wins(pool: asyncpg.Pool) -> None:
    a, b = Leases(pool, A, TTL), Leases(pool, B, TTL)
    await Leases(pool, "c/00000003", TTL).acquire("bot:x")
    for epoch in range(2, 22):
        await expire(pool, "bot:x")
        won = await asyncio.gather(a.acquire("bot:x"), b.claim("bot:x", B))
        fences = [fence for fence in (won[0], b.fence_of("bot:x")) if fence is not None]
        assert [fence.epoch for fence in fences] == [epoch], won


async def test_claim_gives_a_free_lease_to_another_process(pool: asyncpg.Pool) -> None:
    a = Leases(pool, A, TTL)
    holder = await a.claim("session:web:1", B)
    assert holder == Holder("session:web:1", B, 1, True)
    assert a.fence_of("session:web:1") is None
    assert await Leases(pool, B, TTL).acquire("session:web:1") == Fence("session:web:1", B, 1)


async def test_claim_for_self_is_held_locally(pool: asyncpg.Pool) -> None:
    a = Leases(pool, A, TTL)
    holder = await a.claim("session:web:1", A)
    assert a.fence_of("session:web:1") == Fence("session:web:1", A, holder.epoch)


async def test_claim_of_a_live_lease_returns_its_holder(pool: asyncpg.Pool) -> None:
    await add_running_turn(pool, "web:1", "t1")
    await Leases(pool, B, TTL).acquire("session:web:1")
    holder = await Leases(pool, A, TTL).claim("session:web:1", A)
    assert holder == Holder("session:web:1", B, 1, True)
    status = await pool.fetchval("SELECT status FROM turns WHERE id = 't1'")
    assert status == "running"


async def test_session_takeover_fails_the_old_owners_running_turns(pool: asyncpg.Pool) -> None:
    await add_running_turn(pool, "web:1", "t1")
    await add_running_turn(pool, "web:2", "other")
    await Leases(pool, B, TTL).acquire("session:web:1")
    await expire(pool, "session:web:1")
    holder = await Leases(pool, A, TTL).claim("session:web:1", A)
    assert holder == Holder("session:web:1", A, 2, True)
    row = await pool.fetchrow("SELECT * FROM turns WHERE id = 't1'")
    assert row["status"] == "failed"
    assert row["exit_reason"] == "crashed"
    assert row["error"] == stopped_renewing(B) == f"process {B} stopped renewing its lease"
    assert row["finished_at"] is not None and row["finished_at"] > 0
    assert await pool.fetchval("SELECT status FROM turns WHERE id = 'other'") == "running"


async def test_session_takeover_cancels_the_approvals_its_dead_turns_waited_on(
    pool: asyncpg.Pool,
) -> None:
    await add_running_turn(pool, "web:1", "t1")
    await add_running_turn(pool, "web:2", "other")
    for approval, turn, key in (("ap1", "t1", "web:1"), ("ap2", "other", "web:2")):
        await pool.execute(
            "INSERT INTO approvals (id, session_id, session_key, turn_id, tool, arguments,"
            " prompt, requested_at) VALUES ($1, $2, $3, $4, 'terminal', '{}', 'run?', 0)",
            approval, f"s-{key}", key, turn,
        )  # fmt: skip
    await pool.execute(
        "UPDATE approvals SET card_platform = 'web', card_chat_id = '1', card_message_id = 'm7'"
        " WHERE id = 'ap1'"
    )
    await Leases(pool, B, TTL).acquire("session:web:1")
    await expire(pool, "session:web:1")
    taker = Leases(pool, A, TTL)
    told: list[list[ApprovalRecord]] = []
    taker.on_cancelled = told.append
    await taker.claim("session:web:1", A)
    rows = await pool.fetch("SELECT id, state, resolved_by FROM approvals ORDER BY id")
    assert [tuple(r) for r in rows] == [("ap1", "cancelled", RESTART_BY), ("ap2", "pending", None)]
    [[cancelled]] = told  # once committed, with the card to retire
    assert (cancelled.id, cancelled.state, cancelled.tool) == ("ap1", "cancelled", "terminal")
    assert cancelled.card == ApprovalCard("web", "1", None, "m7")
    await taker.claim("session:web:1", A)  # ours now: nothing taken over, nobody told
    assert len(told) == 1


async def test_renew_returns_only_names_still_ours(pool: asyncpg.Pool) -> None:
    a, b = Leases(pool, A, TTL), Leases(pool, B, TTL)
    kept = await a.acquire("bot:kept")
    lost = await a.acquire("bot:lost")
    assert kept is not None and lost is not None
    await expire(pool, "bot:lost")
    assert await b.acquire("bot:lost") == Fence("bot:lost", B, 2)
    assert await a.renew([kept, lost]) == {"bot:kept"}
    assert a.fence_of("bot:lost") is None
    assert a.fence_of("bot:kept") == kept
    assert await b.renew(b.held()) == {"bot:lost"}


async def test_renew_pushes_expiry_to_now_plus_ttl(pool: asyncpg.Pool) -> None:
    a = Leases(pool, A, TTL)
    fence = await a.acquire("bot:x")
    assert fence is not None
    await pool.execute("UPDATE leases SET expires_at = clock_timestamp() + interval '1 second'")
    assert await a.renew([fence]) == {"bot:x"}
    left = await pool.fetchval(
        "SELECT extract(epoch FROM expires_at - clock_timestamp())::float8 FROM leases"
    )
    assert TTL - 5 < left <= TTL


async def test_an_expired_lease_is_not_renewed(pool: asyncpg.Pool) -> None:
    a = Leases(pool, A, TTL)
    fence = await a.acquire("bot:x")
    assert fence is not None
    await expire(pool, "bot:x")
    assert await a.renew([fence]) == set()
    assert await a.acquire("bot:x") == Fence("bot:x", A, 2)


async def test_release_ends_now_and_the_epoch_is_never_reused(pool: asyncpg.Pool) -> None:
    a, b = Leases(pool, A, TTL), Leases(pool, B, TTL)
    fence = await a.acquire("bot:x")
    assert fence is not None
    await a.release(fence)
    assert a.fence_of("bot:x") is None
    assert await a.holder("bot:x") == Holder("bot:x", A, 1, False)
    assert await b.acquire("bot:x") == Fence("bot:x", B, 2)
    assert await a.acquire("bot:x") is None


async def test_release_during_a_renewal_stays_released(pool: asyncpg.Pool) -> None:
    a = Leases(pool, A, TTL)
    fence = await a.acquire("bot:x")
    assert fence is not None
    renewal = asyncio.create_task(a.renew([fence]))
    await a.release(fence)
    await renewal
    assert a.fence_of("bot:x") is None
    assert not a.valid(fence)


async def test_claim_for_self_renews_a_live_own_lease(pool: asyncpg.Pool) -> None:
    now = [0.0]
    a = Leases(pool, A, TTL, clock=lambda: now[0])
    fence = await a.acquire("session:web:1")
    assert fence is not None
    now[0] = TTL
    assert not a.valid(fence)
    assert await a.claim("session:web:1", A) == Holder("session:web:1", A, 1, True)
    assert a.valid(fence)


async def test_release_of_a_lost_fence_leaves_the_new_owner(pool: asyncpg.Pool) -> None:
    a, b = Leases(pool, A, TTL), Leases(pool, B, TTL)
    old = await a.acquire("bot:x")
    assert old is not None
    await expire(pool, "bot:x")
    await b.acquire("bot:x")
    await a.release(old)
    assert await b.holder("bot:x") == Holder("bot:x", B, 2, True)


async def test_expiry_is_judged_on_the_server_clock(pool: asyncpg.Pool) -> None:
    a, b = Leases(pool, A, 0.3), Leases(pool, B, 0.3)
    await a.acquire("bot:x")
    assert await b.acquire("bot:x") is None
    await pool.execute("SELECT pg_sleep(0.35)")
    assert await b.acquire("bot:x") == Fence("bot:x", B, 2)


async def test_valid_follows_the_local_renewal_deadline(pool: asyncpg.Pool) -> None:
    now = [100.0]
    a = Leases(pool, A, 10.0, clock=lambda: now[0])
    fence = await a.acquire("bot:x")
    assert fence is not None
    now[0] = 100.0 + 10.0 - a.margin - 0.01
    assert a.valid(fence)
    now[0] = 100.0 + 10.0 - a.margin
    assert not a.valid(fence)
    assert await a.renew([fence]) == {"bot:x"}
    assert a.valid(fence)


async def test_valid_is_false_for_a_fence_not_held(pool: asyncpg.Pool) -> None:
    a = Leases(pool, A, TTL)
    fence = await a.acquire("bot:x")
    assert fence is not None
    assert not a.valid(Fence("bot:x", A, fence.epoch + 1))
    await a.release(fence)
    assert not a.valid(fence)
