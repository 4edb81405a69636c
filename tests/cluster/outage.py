"""A database outage under two ``commonos run`` processes (issue 28, docs/cluster.md §8):
the scenario of ``tests/cluster/test_e2e_outage.py`` (one run) and ``python -m bench
outage`` (ten in a row).

Two processes on one PostgreSQL database and one Telegram bot (the Telegram simulator,
the scripted model server: :class:`~tests.cluster.answers.Answers`); ``chats`` chats each
say ``per_chat`` messages, the next once the previous one is answered. Once a third of
the answers are shown, PostgreSQL is stopped (a fast shutdown: every connection cut, new
ones refused) for ``down_seconds`` and started again on the same port. The run ends when
every message is answered (or ``timeout`` passes: then it fails naming what is missing).

Counted afterwards (:class:`Outcome`): answers missing and answers shown more than once,
and for each of these when its first copy's ``sendMessage`` arrived — a duplicate is
acceptable only in the in-flight window (docs/cluster.md §8): its first copy was sent
while the store could not take the turn's records (from ``IN_FLIGHT`` seconds before the
stop until the store was back, plus ``IN_FLIGHT``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from tests.cluster.answers import Answers, answer_counts, answer_of, is_answer_to
from tests.cluster.harness import running_cluster
from tests.cluster.processes import cluster_config, telegram_section
from tests.platform_sim.telegram_sim import TelegramSim
from tests.support.model_server import ScriptedModelServer
from tests.support.postgres import PostgresServer

IN_FLIGHT = 1.0
"""A duplicate's first copy must have been sent this close to the outage (seconds)."""
FIRST_CHAT = 40_000


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one run showed."""

    messages: int
    missing: list[str]
    """Messages never answered."""
    twice: dict[str, float]
    """Answers shown more than once → when their first copy was sent (monotonic)."""
    down: tuple[float, float]
    """When the store was stopped and when it was back (monotonic)."""
    seconds: float
    """From the first message to the last answer."""
    logs: str
    """The tail of every process's log (for an assertion's message)."""
    full_logs: str = ""
    """Every process's whole log."""
    rows: str = ""
    """What the store holds for each missing message (its inbound row, its session's
    lease), read after the run: where a lost message stopped."""

    @property
    def outside_window(self) -> dict[str, float]:
        """Duplicates whose first copy was not sent in the in-flight window."""
        start, end = self.down[0] - IN_FLIGHT, self.down[1] + IN_FLIGHT
        return {text: at for text, at in self.twice.items() if not start <= at <= end}


async def outage_run(
    server: PostgresServer,
    url: str,
    sim: TelegramSim,
    model: ScriptedModelServer,
    root: Path,
    *,
    chats: int,
    per_chat: int,
    down_seconds: float,
    timeout: float = 90.0,
) -> Outcome:
    """One run (module docstring) on database ``url`` of ``server``."""
    ids = [FIRST_CHAT + n for n in range(chats)]
    said = {chat: [f"plain-{chat}-{n}" for n in range(per_chat)] for chat in ids}
    total = chats * per_chat
    Answers(model).install(total * 3)
    config = cluster_config(url, model.url, telegram_section(sim, ids))
    async with running_cluster(url, root, config) as cluster:
        await cluster.prepare("b")  # imports while a starts
        await cluster.start("a")
        await cluster.bot_owner("telegram")
        await cluster.start("b")
        started = time.monotonic()
        talks = asyncio.gather(*(_converse(sim, chat, said[chat], timeout) for chat in ids))
        down = (started, started)
        try:
            await sim.wait_for(lambda: _shown(sim, ids) >= total // 3, timeout)
            down = await _outage(server, down_seconds)
            await talks
        except TimeoutError:
            talks.cancel()
        seconds = time.monotonic() - started
        logs = cluster.logs()
        full = "\n".join(f"===== {g.name} ({g.process_id})\n{g.log}" for g in cluster.gateways)
        missing, twice = _tally(sim, said)
        rows = await _rows_of(url, missing) if missing else ""
    return Outcome(total, missing, twice, down, seconds, logs, full, rows)


async def _outage(server: PostgresServer, seconds: float) -> tuple[float, float]:
    """Stop PostgreSQL for ``seconds`` and start it again; (stopped, back) monotonic."""
    stopped = time.monotonic()
    await asyncio.to_thread(server.halt)
    try:
        await asyncio.sleep(max(0.0, stopped + seconds - time.monotonic()))
    finally:
        await asyncio.to_thread(server.resume)
    return stopped, time.monotonic()


async def _converse(sim: TelegramSim, chat: int, texts: list[str], timeout: float) -> None:
    for text in texts:
        await sim.user_says(chat, text)
        await sim.wait_for_bot_message(chat, is_answer_to(text), timeout=timeout)


def _shown(sim: TelegramSim, chats: list[int]) -> int:
    return sum(len(sim.bot_messages(chat)) for chat in chats)


def _tally(sim: TelegramSim, said: dict[int, list[str]]) -> tuple[list[str], dict[str, float]]:
    missing: list[str] = []
    twice: dict[str, float] = {}
    sends = sim.calls_to("sendMessage")
    for chat, texts in said.items():
        counts = answer_counts(sim.messages(chat), texts)
        missing += [text for text in texts if counts[text] == 0]
        for text in (t for t in texts if counts[t] > 1):
            twice[text] = next(c for c in sends if c.params.get("text") == answer_of(text)).arrived
    return missing, twice


async def _rows_of(url: str, missing: list[str]) -> str:
    """The inbound rows of the ``missing`` messages and the leases of their sessions."""
    conn = await asyncpg.connect(url)
    try:
        lines = []
        for text in missing:
            rows = await conn.fetch(
                "SELECT update_id, session_key, state, received_at FROM inbound"
                " WHERE payload LIKE $1",
                f"%{text}%",
            )
            lines += [f"{text}: inbound {dict(row)}" for row in rows] or [f"{text}: no row"]
            for key in {row["session_key"] for row in rows}:
                lease = await conn.fetchrow(
                    "SELECT owner, epoch, expires_at FROM leases WHERE name = $1",
                    f"session:{key}",
                )
                lines.append(f"  lease of {key}: {dict(lease) if lease else None}")
        return "\n".join(lines)
    finally:
        await conn.close()
