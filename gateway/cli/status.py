"""``commonos status``: who shares the store, what each process owns, what runs now
(docs/cluster.md, "Watching it").

On a PostgreSQL store (``[store] url``) it reads, with read-only SQL in one read-only
transaction, the tables the processes coordinate through (:mod:`core.store.pg_cluster_tables`)
and the turns:

* every process seen in the last hour: its name and id, ``host:pid``, ``live`` (seen within
  ``[cluster] lease_seconds``), ``stale`` (not seen since: killed, paused or cut off) or
  ``stopped`` (a clean stop), how long ago it was seen, the bots whose lease it holds, the
  session leases it holds and the turns it runs;
* the leases: every bot lease and the session leases live or ended within the hour (name,
  owner, fencing epoch, expires in / expired N s ago);
* the running turns: session key, the process running it, its age.

Times are the *server's* clock, as the leases' are. On SQLite the store is one process's
file: one line says so, with the running turns it has. It never writes and never migrates,
so it can run beside the gateway, and it is safe against a database that is not ours.

A store that cannot be reached or read is one line on stderr naming the masked URL (never
the password) and exit code 2; a bad config is exit code 1, as for every command.
"""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import sys
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import asyncpg

from gateway.config.sections import mask_url, url_password

SINCE_SECONDS = 3600.0
"""Processes and session leases older than this are left out."""
LEASES_SHOWN = 50
"""At most this many leases are listed (bot leases first); the rest are counted."""
CONNECT_SECONDS = 5.0
EXIT_UNREADABLE = 2

State = Literal["live", "stale", "stopped"]


class StoreUnreadable(Exception):
    """The store could not be reached or read; the message names it without a password."""


@dataclass(frozen=True, slots=True)
class ProcessRow:
    id: str
    name: str
    host: str
    pid: int
    state: State
    seen_ago: float
    bots: tuple[str, ...]
    sessions: int
    turns: int
    web_url: str | None


@dataclass(frozen=True, slots=True)
class LeaseRow:
    name: str
    owner: str
    epoch: int
    expires_in: float
    """Seconds until it ends; negative: it ended that long ago."""


@dataclass(frozen=True, slots=True)
class TurnRow:
    session_key: str
    process_id: str | None
    age: float


@dataclass(frozen=True, slots=True)
class ClusterView:
    processes: tuple[ProcessRow, ...]
    leases: tuple[LeaseRow, ...]
    leases_total: int
    turns: tuple[TurnRow, ...]


# reading PostgreSQL --------------------------------------------------------------------

_PROCESSES = """SELECT p.id, p.name, p.host, p.pid, p.web_url, p.stopped_at IS NOT NULL AS stopped,
        extract(epoch FROM clock_timestamp() - p.seen_at)::float8 AS seen_ago,
        ARRAY(SELECT l.name FROM leases l WHERE l.owner = p.id AND l.name LIKE 'bot:%'
              AND l.expires_at > clock_timestamp() ORDER BY l.name) AS bots,
        (SELECT count(*) FROM leases l WHERE l.owner = p.id AND l.name LIKE 'session:%'
              AND l.expires_at > clock_timestamp()) AS sessions,
        (SELECT count(*) FROM turns t WHERE t.process_id = p.id
              AND t.status = 'running') AS turns
    FROM processes p
    WHERE greatest(p.seen_at, coalesce(p.stopped_at, p.seen_at))
          > clock_timestamp() - make_interval(secs => $1)
    ORDER BY p.name, p.started_at, p.id"""
_LEASES_WHERE = """WHERE name LIKE 'bot:%'
        OR expires_at > clock_timestamp() - make_interval(secs => $1)"""
_LEASES = f"""SELECT name, owner, epoch,
        extract(epoch FROM expires_at - clock_timestamp())::float8 AS expires_in
    FROM leases {_LEASES_WHERE}
    ORDER BY name LIKE 'bot:%' DESC, name LIMIT $2"""
_LEASES_COUNT = f"SELECT count(*) FROM leases {_LEASES_WHERE}"
_RUNNING = """SELECT s.key, t.process_id,
        (extract(epoch FROM clock_timestamp()) - t.started_at)::float8 AS age
    FROM turns t JOIN sessions s ON s.id = t.session_id
    WHERE t.status = 'running' ORDER BY t.started_at, t.id"""


async def read_cluster(url: str, lease_seconds: float) -> ClusterView:
    """What the PostgreSQL store at ``url`` says about its processes, leases and turns."""
    try:
        conn = await asyncpg.connect(url, timeout=CONNECT_SECONDS)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StoreUnreadable(
            f"cannot reach the store {_masked(url)}: {_reason(exc, url)}"
        ) from None
    try:
        async with conn.transaction(readonly=True):
            return await _view(conn, lease_seconds)
    except asyncpg.UndefinedTableError:
        raise StoreUnreadable(
            f"the store {_masked(url)} has no CommonOS cluster tables "
            "(start `commonos run` with this [store] url once)"
        ) from None
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StoreUnreadable(
            f"cannot read the store {_masked(url)}: {_reason(exc, url)}"
        ) from None
    finally:
        await conn.close()


async def _view(conn: asyncpg.Connection, lease_seconds: float) -> ClusterView:
    processes = [
        _process(row, lease_seconds) for row in await conn.fetch(_PROCESSES, SINCE_SECONDS)
    ]
    leases = [
        LeaseRow(row["name"], row["owner"], row["epoch"], row["expires_in"])
        for row in await conn.fetch(_LEASES, SINCE_SECONDS, LEASES_SHOWN)
    ]
    total: int = await conn.fetchval(_LEASES_COUNT, SINCE_SECONDS)
    turns = [
        TurnRow(row["key"], row["process_id"], row["age"]) for row in await conn.fetch(_RUNNING)
    ]
    return ClusterView(tuple(processes), tuple(leases), total, tuple(turns))


def _process(row: asyncpg.Record, lease_seconds: float) -> ProcessRow:
    seen_ago: float = row["seen_ago"]
    state: State = "stopped" if row["stopped"] else "live" if seen_ago <= lease_seconds else "stale"
    return ProcessRow(
        row["id"], row["name"], row["host"], row["pid"], state, seen_ago,
        tuple(row["bots"]), row["sessions"], row["turns"], row["web_url"],
    )  # fmt: skip


def _masked(url: str) -> str:
    return str(mask_url(url))


def _reason(exc: BaseException, url: str) -> str:
    """The exception as one line, the URL and its password replaced by their masked forms;
    the usual connection failures in plain words."""
    if isinstance(exc, TimeoutError):
        return f"no answer within {CONNECT_SECONDS:g} s"
    if isinstance(exc, socket.gaierror):
        return "its host name is unknown"
    if isinstance(exc, ConnectionRefusedError) or "Connect call failed" in str(exc):
        return "nothing listens at that address (connection refused)"
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = text.replace(url, _masked(url))
    password = url_password(url)
    return text.replace(password, "***") if password else text


# reading SQLite ------------------------------------------------------------------------

_SQLITE_RUNNING = """SELECT s.key, NULL, ? - t.started_at
    FROM turns t JOIN sessions s ON s.id = t.session_id
    WHERE t.status = 'running' ORDER BY t.started_at, t.id"""


def read_sqlite_turns(path: Path, now: float) -> list[TurnRow]:
    """The running turns of the SQLite store at ``path``, opened read-only."""
    try:
        with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as conn:
            rows = conn.execute(_SQLITE_RUNNING, (now,)).fetchall()
    except sqlite3.Error as exc:
        raise StoreUnreadable(f"cannot read the SQLite store {path}: {exc}") from None
    return [TurnRow(key, process, age) for key, process, age in rows]


# rendering -----------------------------------------------------------------------------


def render_cluster(display: str, lease_seconds: float, view: ClusterView) -> list[str]:
    """The lines ``commonos status`` prints for a PostgreSQL store."""
    counts = {state: sum(p.state == state for p in view.processes) for state in STATES}
    summary = ", ".join(f"{n} {state}" for state, n in counts.items())
    lines = [f"store: PostgreSQL {display} (leases last {_number(lease_seconds)} s)"]
    lines.append(f"processes seen in the last hour: {summary}")
    lines += table(PROCESS_HEADER, [_process_cells(p) for p in view.processes])
    lines.append(f"leases: {view.leases_total}")
    lines += table(LEASE_HEADER, [_lease_cells(lease) for lease in view.leases])
    if view.leases_total > len(view.leases):
        lines.append(f"  ({view.leases_total - len(view.leases)} more not shown)")
    lines += render_turns(view.turns)
    return lines


def render_sqlite(path: Path, turns: Sequence[TurnRow] | None) -> list[str]:
    """The lines for a SQLite store (``turns`` None: the file does not exist yet)."""
    head = f"store: {path} is a single-process SQLite file (no cluster)"
    if turns is None:
        return [f"{head}; it does not exist yet"]
    return [f"{head}; running turns: {len(turns)}", *_turn_table(turns)]


def render_turns(turns: Sequence[TurnRow]) -> list[str]:
    return [f"running turns: {len(turns)}", *_turn_table(turns)]


STATES: tuple[State, ...] = ("live", "stale", "stopped")
PROCESS_HEADER = ("NAME", "ID", "HOST:PID", "STATE", "SEEN", "BOTS", "SESSIONS", "TURNS", "WEB")
LEASE_HEADER = ("NAME", "OWNER", "EPOCH", "EXPIRES")
TURN_HEADER = ("SESSION", "PROCESS", "AGE")


def _process_cells(p: ProcessRow) -> list[str]:
    return [
        p.name, p.id, f"{p.host}:{p.pid}", p.state, f"{ago(p.seen_ago)} ago",
        ",".join(p.bots) or "-", str(p.sessions), str(p.turns), p.web_url or "-",
    ]  # fmt: skip


def _lease_cells(lease: LeaseRow) -> list[str]:
    ends = (
        f"in {ago(lease.expires_in)}"
        if lease.expires_in > 0
        else f"expired {ago(-lease.expires_in)} ago"
    )
    return [lease.name, lease.owner, str(lease.epoch), ends]


def _turn_table(turns: Sequence[TurnRow]) -> list[str]:
    if not turns:
        return []
    return table(TURN_HEADER, [[t.session_key, t.process_id or "-", ago(t.age)] for t in turns])


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """``header`` and ``rows`` in aligned columns, indented two spaces; nothing without rows."""
    if not rows:
        return []
    every = [header, *rows]
    widths = [max(len(row[i]) for row in every) for i in range(len(header))]
    return [
        "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in every
    ]


def ago(seconds: float) -> str:
    """A duration as an operator reads it: ``7 s``, ``12 min``, ``3 h``."""
    whole = max(0, round(seconds))
    if whole < 120:
        return f"{whole} s"
    if whole < 2 * 3600:
        return f"{whole // 60} min"
    return f"{whole // 3600} h"


def _number(value: float) -> str:
    return f"{value:g}"


# the command ---------------------------------------------------------------------------


def status_lines(config_path: Path | None) -> list[str]:
    """What ``commonos status`` prints; raises ConfigError or :class:`StoreUnreadable`."""
    import time

    from gateway.config import load_config

    config = load_config(config_path)
    if config.store.url is not None:
        lease_seconds = config.cluster.lease_seconds
        view = asyncio.run(read_cluster(config.store.url, lease_seconds))
        return render_cluster(_masked(config.store.url), lease_seconds, view)
    path = config.gateway.db_path
    turns = read_sqlite_turns(path, time.time()) if path.exists() else None
    return render_sqlite(path, turns)


def command(config_path: Path | None) -> int:
    """``commonos status [--config PATH]``: 0 shown, 1 bad config, 2 store unreadable."""
    from gateway.config import ConfigError

    try:
        lines = status_lines(config_path)
    except ConfigError as exc:
        for error in exc.errors:
            print(f"commonos: {error}", file=sys.stderr)
        return 1
    except StoreUnreadable as exc:
        print(f"commonos: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    print("\n".join(lines))
    return 0
