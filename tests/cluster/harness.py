"""Several real ``commonos run`` processes on one PostgreSQL database: the harness of the
cluster's end-to-end tests (tests/cluster/test_e2e_*.py) and of ``bench/cluster.py``
(docs/cluster.md, issue 23).

Each process is ``python -m gateway run --config <root>/config.toml``: one config file
for all (as the operator would deploy it), and each process its own ``COMMONOS_HOME``,
``<root>/<name>``, so its own data dir (workspaces, outbox spool) as on separate hosts:
the database is the only thing they share. A process named in :meth:`Cluster.prepare`
imports the gateway beforehand and runs when :meth:`Cluster.start` names it
(tests/cluster/prepared.py): the second process of a test imports while the first one
starts, instead of after. The config: the web chat off (no ports to
share out), ``[store] url`` = the test's database, ``[cluster] lease_seconds = 2`` (renewed
every 2/3 s) so failovers take seconds, ``[progress] mode = "off"``, the scripted model
server (tests/cluster/answers.py: ``Answers`` answers every request from what it
carries), and the platform sections a test gives (tests/cluster/processes.py:
``telegram_section``, ...; one process is a ``Gateway`` there), streaming off, so an
answer is one message and a chat's calls are few.

Waiting: on the simulators' and the model server's events where they exist; what only
the database knows (who holds a lease, a turn row's end) is read by :func:`eventually`, a
bounded poll every 50 ms, never a fixed sleep.

What the tests read back (:class:`Cluster`): the lease rows (``bot:<platform>:...``), the
``processes`` rows (each gateway's process id, by its pid), the stored turn rows with
``turns.process_id`` (:func:`concurrent_turns` finds two turns of one session at once),
the stored assistant messages (``answers.calls_after_stored``: a model request made after
its answer was already stored) and the tool calls started per message.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import signal
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import asyncpg

from tests.cluster.answers import Answers, Stage, answer_keys, tag_of
from tests.cluster.processes import LEASE_SECONDS, READY, TIMEOUT, Gateway, environment
from tests.platform_sim.base import SimServer

T = TypeVar("T")
PREPARED = Path(__file__).with_name("prepared.py")
RUN_MODULES = ("gateway.cli.main", "gateway.app", "gateway.config", "core.store.postgres")
"""What ``commonos run`` imports before its first log line, whatever the platforms."""
PLATFORM_MODULES = {
    "telegram": "adapters.telegram.adapter",
    "discord": "adapters.discord.adapter",
    "slack": "adapters.slack.adapter",
}
RENEWAL_SECONDS = LEASE_SECONDS / 3
"""How often a process renews its leases (a third of ``lease_seconds``)."""
TAKEOVER_BOUND = LEASE_SECONDS + RENEWAL_SECONDS
"""A dead owner's last renewal + the lease + the taker's next try: the longest takeover."""
POLL_SECONDS = 0.05


# what the database says -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LeaseRow:
    name: str
    owner: str
    epoch: int
    acquired_at: float
    """Wall-clock seconds (the server's ``clock_timestamp()`` at the change of hands)."""
    live: bool
    expires_at: float = 0.0
    """When it ends unless renewed (wall clock): the last renewal + ``lease_seconds``."""


@dataclass(frozen=True, slots=True)
class TurnRow:
    session_key: str
    id: str
    started_at: float
    finished_at: float | None
    status: str
    exit_reason: str | None
    process_id: str | None


def concurrent_turns(turns: Sequence[TurnRow]) -> list[tuple[TurnRow, TurnRow]]:
    """Pairs of turns of one session whose intervals overlap (a running turn: to now)."""
    by_session: dict[str, list[TurnRow]] = {}
    for turn in turns:
        by_session.setdefault(turn.session_key, []).append(turn)
    found = []
    for rows in by_session.values():
        rows.sort(key=lambda row: row.started_at)
        for earlier, later in itertools.pairwise(rows):
            if later.started_at < (earlier.finished_at or time.time()):
                found.append((earlier, later))
    return found


async def eventually(
    check: Callable[[], Awaitable[T | None]], timeout: float = TIMEOUT, what: str = ""
) -> T:
    """The first truthy ``await check()``, polled every 50 ms: for what only the database
    knows; ``TimeoutError`` naming ``what`` when it does not come within ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout}s: {what or check}")
        await asyncio.sleep(POLL_SECONDS)


def _seconds(moment: datetime | float | None) -> float | None:
    if moment is None or isinstance(moment, float | int):
        return moment
    return moment.timestamp()


# the cluster ----------------------------------------------------------------------------------
class Cluster:
    """The processes of one test on one database, and that database read back."""

    def __init__(self, url: str, root: Path, config: str) -> None:
        self.url = url
        self.root = root
        self.text = config
        self.config = root / "config.toml"
        self.config.write_text(config)
        self.gateways: list[Gateway] = []
        self._prepared: dict[str, Gateway] = {}
        self._readers: list[asyncio.Task[None]] = []
        self._db: asyncpg.Connection | None = None

    # processes ----------------------------------------------------------------------------
    async def prepare(self, *names: str) -> None:
        """Spawn the processes ``names`` to import the gateway now and run only when
        :meth:`start` names them (tests/cluster/prepared.py): the second process of a test
        imports while the first one starts, and joins when told, as a cold one would."""
        platforms = (m for s, m in PLATFORM_MODULES.items() if f"\n[{s}]" in self.text)
        modules = [*RUN_MODULES, *platforms]
        for name in names:
            self._prepared[name] = await self._spawn(name, [str(PREPARED), *modules], go=True)

    async def start(self, name: str, *, ready: bool = True) -> Gateway:
        """Start process ``name`` (the one :meth:`prepare` made, or a cold ``python -m gateway
        run``); with ``ready``, wait for its READY line and its row in ``processes``."""
        gateway = self._prepared.pop(name, None)
        if gateway is None:
            run = ["-m", "gateway", "run", "--config", str(self.config)]
            gateway = await self._spawn(name, run, go=False)
        else:
            assert gateway.process.stdin is not None
            gateway.process.stdin.write(f"{self.config}\n".encode())
            gateway.process.stdin.close()
        self.gateways.append(gateway)
        if ready:
            await self.joined(gateway)
        return gateway

    async def _spawn(self, name: str, argv: Sequence[str], *, go: bool) -> Gateway:
        """``python <argv>`` as process ``name``: its own home, its stderr read to the end;
        stdin a pipe to send its ``go`` line (a prepared one), else ``/dev/null``."""
        home = self.root / name
        home.mkdir(exist_ok=True)
        stdin = asyncio.subprocess.PIPE if go else asyncio.subprocess.DEVNULL
        process = await asyncio.create_subprocess_exec(
            sys.executable, *argv, env=environment(home), cwd=home, stdin=stdin,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        gateway = Gateway(name, home, process)
        self._readers.append(asyncio.get_running_loop().create_task(gateway.drain()))
        return gateway

    async def joined(self, gateway: Gateway) -> None:
        """Once ``gateway`` logged READY and has its row in ``processes``."""
        try:
            await gateway.wait_for_line(READY)
            gateway.process_id = await eventually(
                lambda: self._process_id(gateway.pid), TIMEOUT, f"{gateway.name} in processes"
            )
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{gateway.log}") from None

    async def stop(self, gateway: Gateway) -> int:
        """SIGTERM (SIGCONT first if paused); its exit code."""
        if gateway.alive:
            if gateway.paused:
                gateway.resume()
            gateway.process.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(gateway.process.wait(), TIMEOUT)
        except TimeoutError:
            gateway.process.kill()
            await gateway.process.wait()
            raise AssertionError(f"{gateway.name} ignored SIGTERM:\n{gateway.log}") from None

    async def aclose(self) -> None:
        """Stop every started process (SIGTERM) and kill the prepared ones never started."""
        for spare in self._prepared.values():
            with contextlib.suppress(ProcessLookupError):
                spare.process.kill()
            await spare.process.wait()
        for gateway in self.gateways:
            with contextlib.suppress(AssertionError, ProcessLookupError):
                await self.stop(gateway)
        await asyncio.gather(*self._readers, return_exceptions=True)
        if self._db is not None:
            await self._db.close()

    async def expect(self, work: Awaitable[T], what: str) -> T:
        """``await work``; a timeout in it fails the test with every process's log."""
        try:
            return await work
        except TimeoutError as exc:
            raise AssertionError(f"{what}: {exc}\n{await self.summary()}\n{self.logs()}") from None

    async def summary(self) -> str:
        """What the database holds, counted: inbound items, turns, mail, live leases."""
        db = await self.db()
        queries = {
            "inbound": "SELECT state, count(*) FROM inbound GROUP BY 1",
            "turns": "SELECT status || ' ' || coalesce(process_id, '-'), count(*) FROM turns "
            "GROUP BY 1",
            "mail untaken": "SELECT kind || ' to ' || target, count(*) FROM cluster_mail "
            "WHERE taken_at IS NULL GROUP BY 1",
            "mail sent": "SELECT kind || ' from ' || sender, count(*) FROM cluster_mail GROUP BY 1",
            "live leases": "SELECT split_part(name, ':', 1) || ' ' || owner, count(*) FROM leases "
            "WHERE expires_at > clock_timestamp() GROUP BY 1",
        }
        lines = []
        for name, sql in queries.items():
            try:
                rows = await db.fetch(sql)
            except asyncpg.PostgresError as exc:
                rows, name = [], f"{name} ({type(exc).__name__})"
            lines.append(f"{name}: " + ", ".join(f"{r[0]}={r[1]}" for r in rows))
        return "\n".join(lines)

    def by_process_id(self, process_id: str) -> Gateway:
        return next(g for g in self.gateways if g.process_id == process_id)

    def logs(self) -> str:
        """Every process's log, for an assertion's message."""
        return "\n".join(f"===== {g.name} ({g.process_id})\n{g.log[-6000:]}" for g in self.gateways)

    # the database -------------------------------------------------------------------------
    async def db(self) -> asyncpg.Connection:
        if self._db is None:
            self._db = await asyncpg.connect(self.url)
        return self._db

    async def _process_id(self, pid: int) -> str | None:
        with contextlib.suppress(asyncpg.UndefinedTableError):
            row = await (await self.db()).fetchval(
                "SELECT id FROM processes WHERE pid = $1 AND stopped_at IS NULL "
                "ORDER BY started_at DESC LIMIT 1",
                pid,
            )
            return None if row is None else str(row)
        return None

    async def bot_lease(self, platform: str) -> LeaseRow | None:
        """The lease of the one ``platform`` bot (``bot:<platform>:...``), if taken yet."""
        with contextlib.suppress(asyncpg.UndefinedTableError):
            row = await (await self.db()).fetchrow(
                "SELECT name, owner, epoch, acquired_at, expires_at, "
                "expires_at > clock_timestamp() AS live FROM leases WHERE name LIKE $1",
                f"bot:{platform}:%",
            )
            if row is not None:
                acquired = _seconds(row["acquired_at"]) or 0.0
                expires = _seconds(row["expires_at"]) or 0.0
                return LeaseRow(
                    row["name"], row["owner"], row["epoch"], acquired, row["live"], expires
                )
        return None

    async def bot_owner(
        self, platform: str, *, other_than: str | None = None, timeout: float = TIMEOUT
    ) -> LeaseRow:
        """Once the bot's lease is live and held by a process other than ``other_than``."""

        async def owned() -> LeaseRow | None:
            lease = await self.bot_lease(platform)
            if lease is not None and lease.live and lease.owner != other_than:
                return lease
            return None

        return await eventually(owned, timeout, f"a live {platform} bot lease")

    async def owner_of(self, platform: str) -> Gateway:
        """The gateway holding the bot (waits until one does)."""
        return self.by_process_id((await self.bot_owner(platform)).owner)

    async def live_members(self) -> set[str]:
        """Process ids seen within the lease and not stopped."""
        rows = await (await self.db()).fetch(
            "SELECT id FROM processes WHERE stopped_at IS NULL "
            "AND seen_at > clock_timestamp() - make_interval(secs => $1)",
            LEASE_SECONDS,
        )
        return {str(row["id"]) for row in rows}

    async def turns(self) -> list[TurnRow]:
        rows = await (await self.db()).fetch(
            "SELECT s.key, t.id, t.started_at, t.finished_at, t.status, t.exit_reason, "
            "t.process_id FROM turns t JOIN sessions s ON s.id = t.session_id "
            "ORDER BY t.started_at"
        )
        return [_turn_row(row) for row in rows]

    async def assistant_rows(self) -> list[tuple[str | None, str | None, float]]:
        """Every stored assistant message: (content, tool_calls JSON, created_at)."""
        rows = await (await self.db()).fetch(
            "SELECT content, tool_calls, created_at FROM messages WHERE role = 'assistant'"
        )
        return [(r["content"], r["tool_calls"], float(r["created_at"])) for r in rows]

    async def replies_in_flight(self) -> set[str]:
        """The texts of reply chunks started but not yet recorded as sent (docs/architecture.md
        §13): what a process killed now may have shown without knowing it, so its taker
        sends them once more."""
        rows = await (await self.db()).fetch(
            "SELECT text FROM outbox WHERE started_at IS NOT NULL AND sent_at IS NULL"
        )
        return {str(row["text"]) for row in rows}

    async def tool_runs(self) -> Counter[str]:
        """How many times a tool was started (a ``tool_calls`` row, whatever its status) for
        each tool message (:class:`Answers`): more than once would be a blind re-run."""
        rows = await (await self.db()).fetch("SELECT arguments FROM tool_calls")
        return Counter(tag_of(json.loads(row["arguments"] or "{}")) for row in rows)

    async def stored_answers(self) -> dict[tuple[str, Stage], float]:
        """(message, stage) → when its model answer was first stored (see :class:`Answers`)."""
        stored: dict[tuple[str, Stage], float] = {}
        for content, tool_calls, created in await self.assistant_rows():
            for key in answer_keys(content, tool_calls):
                stored[key] = min(created, stored.get(key, created))
        return stored


def _turn_row(row: asyncpg.Record) -> TurnRow:
    return TurnRow(
        str(row["key"]), str(row["id"]), float(row["started_at"]), _seconds(row["finished_at"]),
        str(row["status"]), row["exit_reason"], row["process_id"],
    )  # fmt: skip


async def turn_on_the_other_process(
    cluster: Cluster,
    sim: Any,
    owner: Gateway,
    answers: Answers,
    chats: Sequence[int],
    release: asyncio.Event,
) -> tuple[int, TurnRow]:
    """Held turns (``hold-<chat>``, answered once ``release`` is set) in the Telegram
    ``chats``, one after the other, until one runs on a process that does not own the bot
    (claim-or-forward gives a new session to the least busy process: the owner takes the
    first, the other the next). Returns that chat and its running turn."""
    for n, chat in enumerate(chats):
        text = f"hold-{chat}"
        answers.hold(text, release)
        await sim.user_says(chat, text)
        await answers.server.wait_for_requests(n + 1, TIMEOUT)
        key = f"telegram:dm:{chat}"
        turn = await eventually(partial(_running_turn, cluster, key), TIMEOUT, f"{key}'s turn")
        if turn.process_id != owner.process_id:
            return chat, turn
    raise AssertionError(f"every turn ran on the bot's owner {owner.process_id}")


async def _running_turn(cluster: Cluster, session_key: str) -> TurnRow | None:
    turns = await cluster.turns()
    return next((t for t in turns if t.session_key == session_key and t.status == "running"), None)


@contextlib.asynccontextmanager
async def running_cluster(url: str, root: Path, config: str) -> AsyncIterator[Cluster]:
    """A :class:`Cluster` whose processes are stopped (SIGTERM) at the end."""
    cluster = Cluster(url, root, config)
    try:
        yield cluster
    finally:
        await cluster.aclose()


class Peak:
    """The most of something a simulator held at once (its live gateway connections or
    sockets), sampled at each of the simulator's state changes while the block runs::

        async with Peak(sim, lambda: len(sim.gateway.live())) as connections: ...
        assert connections.value == 1
    """

    def __init__(self, sim: SimServer, count: Callable[[], int]) -> None:
        self.sim = sim
        self.count = count
        self.value = 0
        self._task: asyncio.Task[object] | None = None

    def _sample(self) -> bool:
        self.value = max(self.value, self.count())
        return False  # never done: keep sampling until the block ends

    async def __aenter__(self) -> Peak:
        self._sample()
        self._task = asyncio.get_running_loop().create_task(
            self.sim.wait_for(self._sample, timeout=3600)
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._sample()
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
