"""The PostgreSQL tables several gateway processes coordinate through (docs/cluster.md).

Part of the PostgreSQL store's migrations (:mod:`core.store.pg_migrations`); used by
:mod:`gateway.cluster`. Times here are the *server's* clock (``TIMESTAMPTZ``,
``clock_timestamp()``), so hosts whose clocks disagree still agree on when a lease ends.

* ``processes`` — one row per ``commonos run`` process ever started on the database;
  ``seen_at`` is its last heartbeat (every third of ``[cluster] lease_seconds``),
  ``stopped_at`` is set by a clean stop.
* ``leases`` — ``bot:<platform>:<id>`` (who polls / holds the socket and runs the bot's
  outbound scheduler) and ``session:<session key>`` (who runs the session's turns). A row
  is never deleted: ``epoch`` grows by one at every change of hands, so a fencing epoch is
  never reused; a released lease just ends now (``expires_at``).
* ``cluster_mail`` — durable messages between processes: events forwarded to the process
  running a session, outbound calls relayed to a bot's owner and their results, dashboard
  controls. A ``NOTIFY commonos_mail, '<target>'`` wakes the receiver; it re-reads what is
  untaken on every heartbeat and after reconnecting, since NOTIFY is not replayed.

:func:`guard` is the fence check every fenced write runs first in its transaction
(:mod:`core.store.fencing`): the PostgreSQL store's writes and the mailbox's sends.
"""

from __future__ import annotations

import asyncpg

from core.store.fencing import Fence, Fenced

MAIL_CHANNEL = "commonos_mail"
"""The LISTEN/NOTIFY channel; a notification's payload is the mail's ``target``."""

CLUSTER_TABLES: tuple[str, ...] = (
    """CREATE TABLE processes (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        started_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
        seen_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
        stopped_at TIMESTAMPTZ,
        web_url TEXT
    )""",
    """CREATE TABLE leases (
        name TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        epoch BIGINT NOT NULL,
        acquired_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
        expires_at TIMESTAMPTZ NOT NULL
    )""",
    "CREATE INDEX leases_by_owner ON leases (owner, expires_at)",
    """CREATE TABLE cluster_mail (
        id BIGSERIAL PRIMARY KEY,
        target TEXT NOT NULL,
        kind TEXT NOT NULL,
        sender TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
        taken_at TIMESTAMPTZ
    )""",
    "CREATE INDEX cluster_mail_untaken ON cluster_mail (target, id) WHERE taken_at IS NULL",
    "ALTER TABLE turns ADD COLUMN process_id TEXT",
)
"""One migration of the PostgreSQL store (after the tables it mirrors from SQLite)."""

FENCE_CHECK = """SELECT 1 FROM leases
    WHERE name = $1 AND owner = $2 AND epoch = $3 AND expires_at > clock_timestamp()
    FOR SHARE"""
"""Run first in the transaction of a fenced write (parameters: the fence's lease, owner,
epoch): no row means the write must be refused (:class:`core.store.fencing.Fenced`)."""


async def guard(conn: asyncpg.Connection, fence: Fence | None) -> None:
    """Inside an open transaction: raise ``Fenced(fence)`` unless the lease is still
    ``fence``'s (same owner and epoch, not expired); the row stays share-locked until
    the transaction ends. ``None``: nothing to check."""
    if fence is None:
        return
    if await conn.fetchval(FENCE_CHECK, fence.lease, fence.owner, fence.epoch) is None:
        raise Fenced(fence)
