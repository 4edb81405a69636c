"""``commonos status`` (docs/cluster.md, "Watching it") against a real PostgreSQL server
and a real SQLite file: the processes, the leases, the running turns; an unreachable
store is one line without the password and exit code 2."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from core.store.postgres import open_pg_store
from core.store.sqlite import open_store
from gateway.cli.main import main
from gateway.cluster.leases import Leases
from gateway.cluster.members import Members
from tests.cluster.harness import running_cluster
from tests.cluster.processes import cluster_config, telegram_section
from tests.platform_sim.telegram_sim import TelegramSim
from tests.support.model_server import ScriptedModelServer
from tests.support.postgres import PostgresServer
from tests.test_cli_inbox import commonos, db_path

BOT = "bot:telegram:0123456789ab"
TTL = 15.0
SLACK_BOT = "bot:slack:ba9876543210"
PROCESS = """INSERT INTO processes (id, name, host, pid, started_at, seen_at, stopped_at, web_url)
    VALUES ($1, $2, $3, $4, clock_timestamp() - interval '2 hours',
            clock_timestamp() - make_interval(secs => $5),
            CASE WHEN $6 THEN clock_timestamp() - make_interval(secs => $5) END, $7)"""
LEASE = """INSERT INTO leases (name, owner, epoch, expires_at)
    VALUES ($1, $2, $3, clock_timestamp() + make_interval(secs => $4))"""
AGED = """UPDATE turns SET started_at = extract(epoch FROM clock_timestamp()) - $2
    WHERE id = $1"""
ALPHA, BETA = "alpha/1a2b3c4d", "beta/5e6f7a8b"


async def seed_cluster(url: str) -> None:
    """The store's schema (its migrations); three processes seen within the hour (live,
    stale, stopped) and one older; their leases; two turns running, on two processes (each
    started by its own store), and a finished one."""
    alpha = await open_pg_store(url, process_id=ALPHA, pool_size=2)
    beta = await open_pg_store(url, process_id=BETA, pool_size=2)
    try:
        await alpha.pool.executemany(PROCESS, [
            (ALPHA, "alpha", "host-a", 101, 2.0, False, "http://127.0.0.1:8080"),
            (BETA, "beta", "host-b", 202, 100.0, False, None),
            ("gamma/9c0d1e2f", "gamma", "host-c", 303, 600.0, True, None),
            ("old/00000000", "old", "host-d", 404, 7300.0, True, None),
        ])  # fmt: skip
        await alpha.pool.executemany(LEASE, [
            (BOT, ALPHA, 3, 12.4),
            (SLACK_BOT, BETA, 1, -40.2),
            ("session:telegram:dm:1", ALPHA, 1, 9.6),
            ("session:telegram:dm:2", ALPHA, 2, 10.0),
            ("session:telegram:dm:3", BETA, 5, -85.0),
            ("session:telegram:dm:9", "old/00000000", 1, -7300.0),
        ])  # fmt: skip
        for store, key, turn in ((alpha, "telegram:dm:1", "t1"), (beta, "telegram:dm:3", "t3"),
                                 (alpha, "telegram:dm:2", "t2")):  # fmt: skip
            session = await store.create_session(key, "default")
            await store.start_turn(session.id, turn)
        await alpha.finish_turn("t2", status="completed", exit_reason="text_response", iterations=1)
        await alpha.pool.executemany(AGED, [("t1", 7.2), ("t3", 95.0)])
    finally:
        await alpha.close()
        await beta.close()


def write_config(home: Path, url: str) -> Path:
    path = home / "config.toml"
    path.write_text(
        f'[gateway]\ndata_dir = "{home / "data"}"\n'
        f'[store]\nurl = "{url}"\n[cluster]\nlease_seconds = 15\n'
    )
    return path


async def status(config: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``commonos status --config ...`` by the CLI's main(), in a thread (it runs its own
    event loop)."""
    code = await asyncio.to_thread(main, ["status", "--config", str(config)])
    out, err = capsys.readouterr()
    return code, out, err


def columns(line: str) -> list[str]:
    return line.split()


SLACK_SECONDS = 3
"""How far a shown duration may move while the command runs (a loaded machine)."""


@dataclass(frozen=True, slots=True)
class About:
    """Equal to a shown duration ``(n, unit)`` within :data:`SLACK_SECONDS` of ``n``:
    later for a growing one (``ago``), earlier for one counting ``down`` (``in``)."""

    n: int
    unit: str = "s"
    down: bool = False

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, tuple) or other[1] != self.unit:
            return False
        low, high = (
            (self.n - SLACK_SECONDS, self.n) if self.down else (self.n, self.n + SLACK_SECONDS)
        )
        return bool(low <= other[0] <= high)


def timed(line: str) -> list[object]:
    """The line's columns, each duration (``<n> s`` / ``<n> min``) as one ``(n, unit)``."""
    cells: list[object] = []
    for cell in columns(line):
        last = cells[-1] if cells else None
        if cell in ("s", "min") and isinstance(last, str) and last.isdigit():
            cells[-1] = (int(last), cell)
        else:
            cells.append(cell)
    return cells


async def test_status_lists_processes_leases_and_running_turns(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await seed_cluster(pg_url)
    code, out, err = await status(write_config(tmp_path, pg_url), capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"store: PostgreSQL {pg_url} (leases last 15 s)"
    assert lines[1] == "processes seen in the last hour: 1 live, 1 stale, 1 stopped"
    assert columns(lines[2]) == [
        "NAME", "ID", "HOST:PID", "STATE", "SEEN", "BOTS", "SESSIONS", "TURNS", "WEB",
    ]  # fmt: skip
    assert timed(lines[3]) == [
        "alpha", ALPHA, "host-a:101", "live", About(2), "ago", BOT, "2", "1",
        "http://127.0.0.1:8080",
    ]  # fmt: skip
    assert timed(lines[4]) == [
        "beta", BETA, "host-b:202", "stale", About(100), "ago", "-", "0", "1", "-",
    ]  # fmt: skip
    assert timed(lines[5]) == [
        "gamma", "gamma/9c0d1e2f", "host-c:303", "stopped", About(10, "min"), "ago", "-", "0", "0",
        "-",
    ]  # fmt: skip
    assert lines[6] == "leases: 5"
    assert columns(lines[7]) == ["NAME", "OWNER", "EPOCH", "EXPIRES"]
    assert [timed(line) for line in lines[8:13]] == [
        [SLACK_BOT, BETA, "1", "expired", About(40), "ago"],
        [BOT, ALPHA, "3", "in", About(12, down=True)],
        ["session:telegram:dm:1", ALPHA, "1", "in", About(10, down=True)],
        ["session:telegram:dm:2", ALPHA, "2", "in", About(10, down=True)],
        ["session:telegram:dm:3", BETA, "5", "expired", About(85), "ago"],
    ]
    assert lines[13] == "running turns: 2"
    assert columns(lines[14]) == ["SESSION", "PROCESS", "AGE"]
    assert [timed(line) for line in lines[15:]] == [
        ["telegram:dm:3", BETA, About(95)],
        ["telegram:dm:1", ALPHA, About(7)],
    ]


async def test_status_shows_what_members_leases_and_the_store_recorded(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, pg_url)
    alpha, beta = "alpha/00000001", "beta/00000002"
    store = await open_pg_store(pg_url, process_id=alpha, pool_size=4)
    try:
        pool = store.pool
        await Members(pool, alpha, "alpha", TTL).join("http://127.0.0.1:8765")
        leaving = Members(pool, beta, "beta", TTL)
        await leaving.join()
        alpha_leases, beta_leases = Leases(pool, alpha, TTL), Leases(pool, beta, TTL)
        assert await alpha_leases.acquire(BOT) is not None
        await beta_leases.claim("session:telegram:dm:7", beta)
        await leaving.leave()
        session = await store.create_session("telegram:dm:8", "default")
        await store.start_turn(session.id, "turn-8")

        code, out, err = await status(config, capsys)
        assert (code, err) == (0, "")
        lines = out.splitlines()
        assert lines[1] == "processes seen in the last hour: 1 live, 0 stale, 1 stopped"
        assert timed(lines[3])[3:9] == ["live", About(0), "ago", BOT, "0", "1"]
        assert timed(lines[4])[3:9] == ["stopped", About(0), "ago", "-", "0", "0"]
        assert lines[5] == "leases: 2"
        assert [timed(line) for line in lines[7:9]] == [
            [BOT, alpha, "1", "in", About(15, down=True)],
            ["session:telegram:dm:7", beta, "1", "expired", About(0), "ago"],
        ]
        assert lines[9] == "running turns: 1"
        assert timed(lines[11]) == ["telegram:dm:8", alpha, About(0)]

        await alpha_leases.claim("session:telegram:dm:7", alpha)
        code, out, err = await status(config, capsys)
        lines = out.splitlines()
        assert timed(lines[3])[6:8] == [BOT, "1"]
        assert timed(lines[8]) == ["session:telegram:dm:7", alpha, "2", "in", About(15, down=True)]
    finally:
        await store.close()


async def test_status_lists_fifty_leases_and_counts_the_rest(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await seed_cluster(pg_url)
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.executemany(
            LEASE, [(f"session:telegram:group:-100:{n:03}", ALPHA, 1, 5.0) for n in range(60)]
        )
    finally:
        await conn.close()
    code, out, err = await status(write_config(tmp_path, pg_url), capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    start = lines.index("leases: 65") + 2
    shown = lines[start : start + 50]
    assert [columns(line)[0] for line in shown[:2]] == [SLACK_BOT, BOT]
    assert columns(shown[-1])[0] == "session:telegram:group:-100:044"
    assert lines[start + 50] == "  (15 more not shown)"
    assert lines[start + 51] == "running turns: 2"


def process_rows(out: str) -> dict[str, list[object]]:
    """``commonos status``'s process lines by process id (the second column)."""
    lines = out.splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith("leases: "))
    return {columns(line)[1]: timed(line) for line in lines[3:end]}


async def test_status_of_two_running_processes_and_a_takeover(
    pg_url: str, telegram_sim: TelegramSim, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    config = cluster_config(pg_url, model_server.url, telegram_section(telegram_sim, [42]))
    async with running_cluster(pg_url, tmp_path, config) as cluster:
        await cluster.prepare("b")  # imports while a starts
        first = await cluster.start("a")
        second = await cluster.start("b")
        lease = await cluster.bot_owner("telegram")
        owner, other = (first, second) if lease.owner == first.process_id else (second, first)
        code, out, err = await commonos(tmp_path, "status", "--config", str(cluster.config))
        assert (code, err) == (0, ""), out
        assert out.splitlines()[1] == "processes seen in the last hour: 2 live, 0 stale, 0 stopped"
        rows = process_rows(out)
        assert rows[owner.process_id][2:4] == [f"{socket.gethostname()}:{owner.pid}", "live"]
        assert rows[owner.process_id][6:7] == [lease.name]
        assert rows[other.process_id][2:4] == [f"{socket.gethostname()}:{other.pid}", "live"]
        assert rows[other.process_id][6:7] == ["-"]

        owner.kill()
        taken = await cluster.expect(
            cluster.bot_owner("telegram", other_than=owner.process_id), "the takeover"
        )
        assert (taken.owner, taken.epoch) == (other.process_id, lease.epoch + 1)
        code, out, err = await commonos(tmp_path, "status", "--config", str(cluster.config))
        assert (code, err) == (0, ""), out
        assert out.splitlines()[1] == "processes seen in the last hour: 1 live, 1 stale, 0 stopped"
        rows = process_rows(out)
        assert rows[owner.process_id][3] == "stale" and rows[owner.process_id][6] == "-"
        assert rows[other.process_id][3] == "live" and rows[other.process_id][6] == lease.name
        bot_line = next(line for line in out.splitlines() if line.startswith(f"  {lease.name} "))
        assert timed(bot_line)[1:4] == [other.process_id, str(lease.epoch + 1), "in"]


async def test_status_of_a_database_without_our_tables_is_one_line_exit_2(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await status(write_config(tmp_path, pg_url), capsys)
    assert (code, out) == (2, "")
    assert err == (
        f"commonos: the store {pg_url} has no CommonOS cluster tables "
        "(start `commonos run` with this [store] url once)\n"
    )


async def test_an_unreachable_store_is_one_line_exit_2_without_the_password(
    tmp_path: Path,
) -> None:
    listener = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    write_config(tmp_path, f"postgresql://gateway:Sup3rS3cret@127.0.0.1:{port}/commonos")
    code, out, err = await commonos(tmp_path, "status")
    assert (code, out) == (2, "")
    assert err == (
        f"commonos: cannot reach the store postgresql://gateway:***@127.0.0.1:{port}/commonos: "
        "nothing listens at that address (connection refused)\n"
    )


async def test_a_database_that_does_not_exist_is_one_line_exit_2(
    pg_server: PostgresServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = pg_server.url("no_such_database")
    code, out, err = await status(write_config(tmp_path, url), capsys)
    assert (code, out) == (2, "")
    assert err == (
        f'commonos: cannot reach the store {url}: database "no_such_database" does not exist\n'
    )


async def test_status_of_a_sqlite_store_is_one_line_and_its_running_turns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = db_path(tmp_path)
    config = tmp_path / "config.toml"
    code, out, err = await status(config, capsys)
    assert (code, err) == (0, "")
    assert (
        out
        == f"store: {path} is a single-process SQLite file (no cluster); it does not exist yet\n"
    )
    store = await open_store(path)
    try:
        session = await store.create_session("telegram:dm:42", "default")
        await store.start_turn(session.id, "turn-1")
        idle = await store.create_session("telegram:dm:43", "default")
        await store.start_turn(idle.id, "turn-2")
        await store.finish_turn(
            "turn-2", status="completed", exit_reason="text_response", iterations=1
        )
        code, out, err = await status(config, capsys)
    finally:
        await store.close()
    assert (code, err) == (0, "")
    head, header, turn = out.splitlines()
    assert head == f"store: {path} is a single-process SQLite file (no cluster); running turns: 1"
    assert columns(header) == ["SESSION", "PROCESS", "AGE"]
    assert timed(turn) == ["telegram:dm:42", "-", About(0)]
