"""Members: the ``commonos run`` processes sharing one database (docs/cluster.md).

Each process has a row in ``processes`` (:mod:`core.store.pg_cluster_tables`): it joins
at start, beats (``seen_at``) every third of the lease ttl, and leaves on a clean stop
(``stopped_at``; every lease it holds ends at once, so the others take over without waiting
for them to expire). A process is *live* while it was seen within the ttl and has not
stopped. New sessions go to the live process running the fewest sessions
(:meth:`Members.least_busy`), so the load spreads without a coordinator.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import asyncpg

_JOIN = """INSERT INTO processes (id, name, host, pid, web_url) VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (id) DO UPDATE SET seen_at = clock_timestamp(), stopped_at = NULL,
        web_url = EXCLUDED.web_url"""
_BEAT = "UPDATE processes SET seen_at = clock_timestamp() WHERE id = $1"
_STOP = "UPDATE processes SET stopped_at = clock_timestamp() WHERE id = $1"
_END_LEASES = """UPDATE leases SET expires_at = clock_timestamp()
    WHERE owner = $1 AND expires_at > clock_timestamp()"""
_SELECT = """SELECT p.id, p.name, p.host, p.pid, p.web_url,
        extract(epoch FROM p.started_at)::float8 AS started_at,
        extract(epoch FROM p.seen_at)::float8 AS seen_at,
        coalesce(array_agg(l.name ORDER BY l.name) FILTER (WHERE l.name LIKE 'bot:%'),
            '{}') AS bots,
        count(l.name) FILTER (WHERE l.name LIKE 'session:%') AS sessions
    FROM processes p LEFT JOIN leases l
        ON l.owner = p.id AND l.expires_at > clock_timestamp()
    WHERE <where>
    GROUP BY p.id ORDER BY p.started_at, p.id"""
_LIVE = _SELECT.replace(
    "<where>",
    "p.stopped_at IS NULL AND p.seen_at > clock_timestamp() - make_interval(secs => $1)",
)
_RECENT = _SELECT.replace("<where>", "p.seen_at > clock_timestamp() - make_interval(secs => $1)")


@dataclass(frozen=True, slots=True)
class Member:
    """One process as the database sees it; times are the server's (epoch seconds);
    ``bots`` and ``sessions``: the live leases it holds."""

    id: str
    name: str
    host: str
    pid: int
    started_at: float
    seen_at: float
    web_url: str | None
    bots: tuple[str, ...]
    sessions: int


class Members:
    """This process's row of ``processes`` and the view of the others'."""

    def __init__(self, pool: asyncpg.Pool, process_id: str, name: str, ttl: float) -> None:
        self._pool = pool
        self._process_id = process_id
        self._name = name
        self._ttl = ttl

    async def join(self, web_url: str | None = None) -> None:
        """Register this process (name, host, pid, where its web dashboard is)."""
        await self._pool.execute(
            _JOIN, self._process_id, self._name, socket.gethostname(), os.getpid(), web_url
        )

    async def beat(self) -> None:
        """This process is alive now."""
        await self._pool.execute(_BEAT, self._process_id)

    async def leave(self) -> None:
        """A clean stop: the row is marked stopped and every lease held ends now."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(_STOP, self._process_id)
            await conn.execute(_END_LEASES, self._process_id)

    async def live(self) -> list[Member]:
        """The processes seen within the ttl and not stopped, oldest first."""
        return _members(await self._pool.fetch(_LIVE, self._ttl))

    async def everyone(self, since: float = 3600) -> list[Member]:
        """Every process seen within ``since`` seconds, stopped or dead ones too."""
        return _members(await self._pool.fetch(_RECENT, since))

    async def least_busy(self) -> str:
        """The live process holding the fewest live session leases; this one on a tie
        (and when no process is live, say before joining)."""
        members = await self.live()
        if not members:
            return self._process_id
        fewest = min(member.sessions for member in members)
        tied = [member.id for member in members if member.sessions == fewest]
        return self._process_id if self._process_id in tied else tied[0]


def _members(rows: list[asyncpg.Record]) -> list[Member]:
    return [
        Member(
            id=row["id"],
            name=row["name"],
            host=row["host"],
            pid=row["pid"],
            started_at=row["started_at"],
            seen_at=row["seen_at"],
            web_url=row["web_url"],
            bots=tuple(row["bots"]),
            sessions=row["sessions"],
        )
        for row in rows
    ]
