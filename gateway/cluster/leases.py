"""Leases: which process owns a bot or runs a session, decided by the server (docs/cluster.md).

A lease is a row of ``leases`` (:mod:`core.store.pg_cluster_tables`): ``name`` (``bot:...``
or ``session:<key>``), ``owner`` (a process id), ``epoch`` and ``expires_at``. Expiry is
judged on the *server's* clock (``clock_timestamp()``), so hosts whose clocks disagree
still agree on when a lease ends. A row is never deleted and its epoch grows by one at
every change of hands (a release only ends it now), so a :class:`Fence` is never granted
twice and a stale owner's fenced writes are refused.

Taking over an expired ``session:`` lease also fails that session's turns still
``running`` in the same transaction: their process stopped renewing, so nobody will end
them, and the new owner must not find them running. The approvals those turns waited on
are cancelled with them, and once the transaction committed they are handed to
:attr:`Leases.on_cancelled` (the node retires their cards, as a restart does).

Locally, :meth:`Leases.valid` tells whether a fence was renewed recently enough (last
successful renewal on the monotonic clock, plus ttl, minus a margin) to call a platform
straight away without asking the server: a process that was paused for longer than that
must assume it lost the lease.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import asyncpg

from core.approvals import RESTART_BY
from core.store.base import ApprovalRecord
from core.store.fencing import Fence
from core.store.tool_calls import approval_from_row

SESSION_PREFIX = "session:"
MARGIN_FRACTION = 0.2
"""``valid()`` stops trusting a renewal this share of the ttl before the server would."""

_LOCK = """SELECT owner, epoch, expires_at > clock_timestamp() AS live
    FROM leases WHERE name = $1 FOR UPDATE"""
_INSERT = """INSERT INTO leases (name, owner, epoch, expires_at)
    VALUES ($1, $2, 1, clock_timestamp() + make_interval(secs => $3))
    ON CONFLICT (name) DO NOTHING RETURNING epoch"""
_HAND_OVER = """UPDATE leases SET owner = $2, epoch = epoch + 1,
    acquired_at = clock_timestamp(), expires_at = clock_timestamp() + make_interval(secs => $3)
    WHERE name = $1 RETURNING epoch"""
_EXTEND = """UPDATE leases SET expires_at = clock_timestamp() + make_interval(secs => $3)
    WHERE name = $1 AND owner = $2 RETURNING epoch"""
_FAIL_TURNS = """WITH failed AS (
        UPDATE turns SET status = 'failed', exit_reason = 'crashed', error = $2,
            finished_at = extract(epoch FROM clock_timestamp())
        WHERE status = 'running' AND session_id IN (SELECT id FROM sessions WHERE key = $1)
        RETURNING id)
    UPDATE approvals SET state = 'cancelled', resolved_by = $3,
        resolved_at = extract(epoch FROM clock_timestamp())
    WHERE state = 'pending' AND turn_id IN (SELECT id FROM failed)
    RETURNING approvals.*"""
"""The session's turns left running by the lease's old owner fail, and the approvals they
waited on are cancelled as at a restart (a press on such a card is told so: RESTART_BY);
the cancelled approvals, whose cards are still live."""
_HOLDER = """SELECT owner, epoch, expires_at > clock_timestamp() AS live
    FROM leases WHERE name = $1"""
_RENEW = """UPDATE leases SET expires_at = clock_timestamp() + make_interval(secs => $4)
    FROM unnest($1::text[], $2::bigint[]) AS held (name, epoch)
    WHERE leases.name = held.name AND leases.epoch = held.epoch AND leases.owner = $3
      AND leases.expires_at > clock_timestamp()
    RETURNING leases.name"""
_RELEASE = """UPDATE leases SET expires_at = clock_timestamp()
    WHERE name = $1 AND owner = $2 AND epoch = $3 AND expires_at > clock_timestamp()"""


Cancelled = Callable[[list[ApprovalRecord]], None]
"""Told the approvals a takeover cancelled, once it committed (never raises)."""


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a lease as the server sees it; ``live``: it has not expired yet."""

    name: str
    owner: str
    epoch: int
    live: bool


def stopped_renewing(owner: str) -> str:
    """The error a taken-over session's running turns are failed with."""
    return f"process {owner} stopped renewing its lease"


class Leases:
    """This process's side of the ``leases`` table, with a local view of what it holds."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        process_id: str,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.margin = ttl * MARGIN_FRACTION
        self._pool = pool
        self._process_id = process_id
        self._clock = clock
        self._held: dict[str, Fence] = {}
        self._renewed: dict[str, float] = {}
        self.on_cancelled: Cancelled | None = None
        """Told the approvals a session takeover cancelled (their cards still live)."""

    async def acquire(self, name: str) -> Fence | None:
        """Take ``name`` for this process when free or expired (epoch + 1); renew it when
        already ours and live (same epoch); None while another process holds it."""
        asked = self._clock()
        holder = await self._take(name, self._process_id, extend_ours=True)
        if holder.owner != self._process_id or not holder.live:
            self._forget(name)
            return None
        return self._keep(holder, asked)

    async def claim(self, name: str, owner: str) -> Holder:
        """Give ``name`` to ``owner`` (this or another live process) if free or expired;
        the holder as it stands afterwards, maybe someone else."""
        asked = self._clock()
        mine = owner == self._process_id  # ours and live: renewed, as acquire would
        holder = await self._take(name, owner, extend_ours=mine)
        if holder.owner != self._process_id:
            self._forget(name)
        elif mine:
            self._keep(holder, asked)
        return holder

    async def holder(self, name: str) -> Holder | None:
        """The lease's row now, or None when nobody ever held it."""
        row = await self._pool.fetchrow(_HOLDER, name)
        if row is None:
            return None
        return Holder(name, row["owner"], row["epoch"], row["live"])

    async def renew(self, fences: Iterable[Fence]) -> set[str]:
        """Push the expiry of every fence still ours (same owner and epoch, not expired) to
        now + ttl in one statement; the names renewed. The others are dropped locally; a
        fence released while the renewal ran stays released."""
        mine = [fence for fence in fences if fence.owner == self._process_id]
        if not mine:
            return set()
        asked = self._clock()
        rows = await self._pool.fetch(
            _RENEW,
            [fence.lease for fence in mine],
            [fence.epoch for fence in mine],
            self._process_id,
            self.ttl,
        )
        renewed = {row["name"] for row in rows}
        for fence in mine:
            if self._held.get(fence.lease) != fence:
                continue
            if fence.lease in renewed:
                self._renewed[fence.lease] = asked
            else:
                self._forget(fence.lease)
        return renewed

    async def release(self, fence: Fence) -> None:
        """End the lease now if still ours at that epoch; the epoch stays (the next holder
        gets epoch + 1)."""
        if self._held.get(fence.lease) == fence:
            self._forget(fence.lease)
        await self._pool.execute(_RELEASE, fence.lease, fence.owner, fence.epoch)

    def valid(self, fence: Fence) -> bool:
        """Locally: the fence is what this process holds and was renewed within ttl minus
        the margin (no server round trip)."""
        if self._held.get(fence.lease) != fence:
            return False
        return self._clock() < self._renewed[fence.lease] + self.ttl - self.margin

    def fence_of(self, name: str) -> Fence | None:
        """The fence this process holds for ``name`` (local view), if any."""
        return self._held.get(name)

    def held(self) -> list[Fence]:
        """Every fence this process holds (local view), for the heartbeat's renewal."""
        return list(self._held.values())

    async def _take(self, name: str, owner: str, *, extend_ours: bool) -> Holder:
        cancelled: list[ApprovalRecord] = []
        holder = await self._change_hands(name, owner, cancelled, extend_ours=extend_ours)
        if cancelled and self.on_cancelled is not None:
            self.on_cancelled(cancelled)
        return holder

    async def _change_hands(
        self, name: str, owner: str, cancelled: list[ApprovalRecord], *, extend_ours: bool
    ) -> Holder:
        """One transaction: take, renew or read the lease; a session taken over fails its
        dead turns and adds the approvals they waited on to ``cancelled``."""
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(_LOCK, name)
            if row is None:
                epoch = await conn.fetchval(_INSERT, name, owner, self.ttl)
                if epoch is not None:
                    return Holder(name, owner, epoch, True)
                row = await conn.fetchrow(_LOCK, name)  # lost the race: the winner's row
            if row["live"]:
                if extend_ours and row["owner"] == owner:
                    await conn.execute(_EXTEND, name, owner, self.ttl)
                return Holder(name, row["owner"], row["epoch"], True)
            epoch = await conn.fetchval(_HAND_OVER, name, owner, self.ttl)
            if name.startswith(SESSION_PREFIX):
                key = name.removeprefix(SESSION_PREFIX)
                why = stopped_renewing(row["owner"])
                rows = await conn.fetch(_FAIL_TURNS, key, why, RESTART_BY)
                cancelled.extend(map(approval_from_row, rows))
            return Holder(name, owner, epoch, True)

    def _keep(self, holder: Holder, asked: float) -> Fence:
        fence = Fence(holder.name, holder.owner, holder.epoch)
        self._held[holder.name] = fence
        self._renewed[holder.name] = asked
        return fence

    def _forget(self, name: str) -> None:
        self._held.pop(name, None)
        self._renewed.pop(name, None)
