"""``python -m bench cluster``: several ``commonos run`` processes on one PostgreSQL database
(docs/cluster.md, issue 23), through the real platform SDKs against the simulators and the
scripted model server (tests/cluster/harness.py: one config, each process its own home,
``lease_seconds = 2``), PostgreSQL started from the installed binaries
(tests/support/postgres.py).

Printed:

1. **One bot** (Telegram): answers/s and CPU per answer for 1, 2 and 3 processes. CPU is
   utime + stime of every gateway process (``/proc/<pid>/stat``) over the run; the
   simulators, the model server and PostgreSQL are not counted. The bot's owner paces the
   whole bot at Telegram's 30 messages a second, so answers/s is capped by the platform
   whatever the number of processes; CPU per answer shows what the cluster costs.
2. **Three bots**: one Telegram bot, one Discord bot and one Slack app, the messages
   spread over them, for 1, 2 and 3 processes. The config has one bot per platform
   (``[telegram]``, ``[discord]``, ``[slack]``), so three is the most bots one cluster
   can have; the issue's "10 bots" would need several bots per platform.
3. **Failover**, 10 times with two processes: SIGKILL of the Telegram bot's owner, then the
   time to the other process's lease (``leases.acquired_at``, the server's clock) and to
   the answer of a message sent right after the kill; p50 and max. The killed process is
   replaced by a new one before the next kill. Expected: within ``lease_seconds`` + a
   third of it (2.67 s here); with the default ``lease_seconds`` (``ClusterSection``, 10)
   every figure scales by default / 2 (takeover within 13.3 s).

Each chat sends its next message once the previous one is answered; the chats run at once.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from bench.figures import percentile
from bench.sizes import Sizes
from gateway.config.sections import ClusterSection
from tests.cluster.answers import (
    Answers,
    is_answer_to,
)
from tests.cluster.harness import (
    TAKEOVER_BOUND,
    Cluster,
    running_cluster,
)
from tests.cluster.processes import (
    LEASE_SECONDS,
    cluster_config,
    discord_section,
    slack_section,
    telegram_section,
)
from tests.platform_sim.base import SimServer
from tests.platform_sim.discord_payloads import DcUser
from tests.platform_sim.discord_sim import DiscordSim
from tests.platform_sim.slack_sim import SlackSim, SlackUser
from tests.platform_sim.telegram_sim import TelegramSim
from tests.support.model_server import ScriptedModelServer
from tests.support.postgres import PostgresServer, running_postgres

ANSWER_TIMEOUT = 90.0
PROCESS_COUNTS = (1, 2, 3)
CHATS_PER_BOT = 30
KILLS = 10
DEFAULT_LEASE = ClusterSection().lease_seconds
_names = itertools.count(1)
S = TypeVar("S", bound=SimServer)


@dataclass(frozen=True, slots=True)
class Chat:
    """One conversation: say a text, wait for its answer."""

    say: Callable[[str], Awaitable[object]]
    answered: Callable[[str], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class Bots:
    """The simulators of one run, their config sections and chats."""

    sections: str
    chats: list[Chat]
    connected: Callable[[], Awaitable[object]]
    """Until every bot's owner is connected (Discord events before that are lost)."""


@dataclass(frozen=True, slots=True)
class Throughput:
    bots: str
    processes: int
    answers: int
    seconds: float
    cpu: float
    stalled: str = ""
    """What the database held when a chat waited in vain (empty: every answer came)."""


# the bots -------------------------------------------------------------------------------------
async def _telegram(stack: AsyncExitStack) -> tuple[str, list[Chat]]:
    sim = await _started(stack, TelegramSim())
    ids = [30_000 + n for n in range(CHATS_PER_BOT)]

    def chat(chat_id: int) -> Chat:
        return Chat(
            lambda text: sim.user_says(chat_id, text),
            lambda text: sim.wait_for_bot_message(chat_id, is_answer_to(text), ANSWER_TIMEOUT),
        )

    return telegram_section(sim, ids), [chat(i) for i in ids]


async def _discord(stack: AsyncExitStack) -> tuple[str, list[Chat], DiscordSim]:
    sim = await _started(stack, DiscordSim())
    users = [DcUser(str(5_000 + n), f"user{n}") for n in range(CHATS_PER_BOT)]

    def chat(user: DcUser) -> Chat:
        channel = sim.dm_channel(user)
        return Chat(
            lambda text: sim.user_says(channel, text, user=user),
            lambda text: sim.wait_for_bot_message(channel, is_answer_to(text), ANSWER_TIMEOUT),
        )

    return discord_section(sim, [u.id for u in users]), [chat(u) for u in users], sim


async def _slack(stack: AsyncExitStack) -> tuple[str, list[Chat]]:
    sim = await _started(stack, SlackSim())
    users = [SlackUser(f"U{n:07d}Z", f"user{n}") for n in range(CHATS_PER_BOT)]
    for user in users:
        sim.users[user.id] = user

    def chat(user: SlackUser) -> Chat:
        channel = sim.dm_channel(user)
        return Chat(
            lambda text: sim.user_says(channel, text, user=user),
            lambda text: sim.wait_for_bot_message(channel, is_answer_to(text), ANSWER_TIMEOUT),
        )

    return slack_section(sim, [u.id for u in users]), [chat(u) for u in users]


async def _started(stack: AsyncExitStack, sim: S) -> S:
    await sim.start()
    stack.push_async_callback(sim.stop)
    return sim


@asynccontextmanager
async def _bots(platforms: Sequence[str]) -> AsyncIterator[Bots]:
    async with AsyncExitStack() as stack:
        sections, chats = "", list[Chat]()
        discord: DiscordSim | None = None
        if "telegram" in platforms:
            section, more = await _telegram(stack)
            sections, chats = sections + section, chats + more
        if "discord" in platforms:
            section, more, discord = await _discord(stack)
            sections, chats = sections + section, chats + more
        if "slack" in platforms:
            section, more = await _slack(stack)
            sections, chats = sections + section, chats + more
        yield Bots(sections, chats, lambda: _connected(discord))


async def _connected(discord: DiscordSim | None) -> None:
    if discord is not None:
        live = discord.gateway.live
        await discord.wait_for(lambda: any(c.session for c in live()), ANSWER_TIMEOUT)


# measuring ------------------------------------------------------------------------------------
async def _converse(chat: Chat, texts: Sequence[str], answered: list[int] | None = None) -> None:
    for text in texts:
        await chat.say(text)
        await chat.answered(text)
        if answered is not None:
            answered[0] += 1


async def _throughput(
    pg: PostgresServer,
    model: ScriptedModelServer,
    platforms: Sequence[str],
    processes: int,
    messages: int,
) -> Throughput:
    url = pg.url(await pg.create_database())
    run = next(_names)
    async with _bots(platforms) as bots:
        per_chat = max(1, messages // len(bots.chats))
        config = cluster_config(url, model.url, bots.sections)
        with tempfile.TemporaryDirectory(prefix="bench-cluster-") as root:
            async with running_cluster(url, Path(root), config) as cluster:
                for n in range(processes):
                    await cluster.start(f"p{n}")
                await bots.connected()
                await _converse(bots.chats[0], [f"plain-warmup-{run}"])
                cpu_before = _cpu(cluster)
                started = time.perf_counter()
                answered, stalled = [0], ""
                talks = [
                    _converse(chat, [f"plain-{run}-{c}-{n}" for n in range(per_chat)], answered)
                    for c, chat in enumerate(bots.chats)
                ]
                try:
                    await _all(talks)
                except TimeoutError:
                    stalled = await cluster.summary()
                seconds = time.perf_counter() - started
                cpu = _cpu(cluster) - cpu_before
    name = "+".join(platforms)
    return Throughput(name, processes, answered[0], seconds, cpu, stalled)


async def _all(work: Sequence[Awaitable[None]]) -> None:
    """Await every one; the first failure cancels the rest and is raised."""
    tasks = [asyncio.ensure_future(one) for one in work]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _cpu(cluster: Cluster) -> float:
    return sum(g.cpu_seconds() for g in cluster.gateways if g.alive)


async def _failover(pg: PostgresServer, model: ScriptedModelServer, kills: int) -> None:
    url = pg.url(await pg.create_database())
    takeovers: list[float] = []
    remaining: list[float] = []
    first_answers: list[float] = []
    async with _bots(["telegram"]) as bots:
        config = cluster_config(url, model.url, bots.sections)
        with tempfile.TemporaryDirectory(prefix="bench-failover-") as root:
            async with running_cluster(url, Path(root), config) as cluster:
                await cluster.start("p0")
                await cluster.start("p1")
                for kill in range(kills):
                    lease = await cluster.bot_owner("telegram")
                    owner = cluster.by_process_id(lease.owner)
                    killed_at = owner.kill()
                    remaining.append(lease.expires_at - killed_at)
                    sent = time.perf_counter()
                    chat = bots.chats[kill % len(bots.chats)]
                    await chat.say(f"plain-failover-{kill}")
                    await owner.process.wait()
                    taker = await cluster.bot_owner("telegram", other_than=owner.process_id)
                    takeovers.append(taker.acquired_at - killed_at)
                    await chat.answered(f"plain-failover-{kill}")
                    first_answers.append(time.perf_counter() - sent)
                    await cluster.start(f"p{kill + 2}")
    print(f"\nfailover: {kills} SIGKILLs of the Telegram bot's owner, 2 processes, "
          f"lease_seconds = {LEASE_SECONDS:g} (bound {TAKEOVER_BOUND:.2f} s)")  # fmt: skip
    rows = (("lease left at the kill", remaining), ("takeover (kill → lease)", takeovers),
            ("kill → first answer", first_answers))  # fmt: skip
    scale = DEFAULT_LEASE / LEASE_SECONDS
    for what, values in rows:
        p50 = percentile(values, 0.5)
        print(f"  {what:26} p50 {p50:6.2f} s   max {max(values):6.2f} s"
              f"   (default lease {DEFAULT_LEASE:g} s: p50 ~{p50 * scale:5.1f} s)")  # fmt: skip


def _print(rows: Sequence[Throughput]) -> None:
    print("\ncluster throughput (each chat waits for its answer; CPU = all gateway processes)")
    print(f"  {'bots':26} {'processes':>9} {'answers':>8} {'answers/s':>10} {'CPU/answer':>11}")
    for row in rows:
        rate, cpu_ms = row.answers / row.seconds, row.cpu / max(1, row.answers) * 1000
        print(f"  {row.bots:26} {row.processes:9d} {row.answers:8d} {rate:10.1f} {cpu_ms:8.2f} ms")
        if row.stalled:
            print(f"    STALLED: a chat waited {ANSWER_TIMEOUT:g} s in vain; the database:")
            print("    " + row.stalled.replace("\n", "\n    "))


async def run(sizes: Sizes) -> None:
    messages = max(60, sizes.turns)
    kills = KILLS if sizes.turns >= 200 else 3
    async with running_postgres("bench-cluster") as pg, ScriptedModelServer() as model:
        Answers(model).install(100_000)
        rows = [
            await _throughput(pg, model, platforms, processes, messages)
            for platforms in (["telegram"], ["telegram", "discord", "slack"])
            for processes in PROCESS_COUNTS
        ]
        _print(rows)
        await _failover(pg, model, kills)
