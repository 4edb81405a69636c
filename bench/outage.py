"""``python -m bench outage``: PostgreSQL stopped for 5 s in the middle of 60 messages over
two ``commonos run`` processes, ten runs in a row (issue 28 "Done when"; docs/cluster.md
§8). The scenario is ``tests/cluster/outage.py`` (the test suite runs it once:
``tests/cluster/test_e2e_outage.py``): the Telegram simulator, the scripted model server,
PostgreSQL from the installed binaries, a new database and simulator for each run.

Printed, per run and in total: messages, unanswered (must be 0), replies shown twice and
how many of those fell outside the in-flight window (must be 0: on Telegram a reply sent
while the store could not record it may show twice, docs/cluster.md §8), the outage as
measured (stop to back) and the run's length. ``--quick``: three runs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench.sizes import Sizes
from tests.cluster.outage import Outcome, outage_run
from tests.platform_sim.telegram_sim import TelegramSim
from tests.support.model_server import ScriptedModelServer
from tests.support.postgres import PostgresServer, running_postgres

RUNS = 10
QUICK_RUNS = 3
CHATS = 20
PER_CHAT = 3
DOWN_SECONDS = 5.0


async def run(sizes: Sizes) -> None:
    runs = RUNS if sizes.turns >= 200 else QUICK_RUNS
    outcomes: list[Outcome] = []
    async with running_postgres("bench-outage") as pg, ScriptedModelServer() as model:
        print(f"\nPostgreSQL stopped {DOWN_SECONDS:g} s mid-run: {CHATS} chats x {PER_CHAT} "
              f"messages over 2 processes, {runs} runs")  # fmt: skip
        print(f"  {'run':>3} {'messages':>8} {'unanswered':>10} {'twice':>5} "
              f"{'outside':>7} {'down':>6} {'length':>7}")  # fmt: skip
        for number in range(1, runs + 1):
            outcome = await _one(pg, model)
            outcomes.append(outcome)
            _row(str(number), outcome)
    _total(outcomes)


async def _one(pg: PostgresServer, model: ScriptedModelServer) -> Outcome:
    url = pg.url(await pg.create_database())
    sim = TelegramSim()
    await sim.start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-outage-") as root:
            return await outage_run(
                pg, url, sim, model, Path(root),
                chats=CHATS, per_chat=PER_CHAT, down_seconds=DOWN_SECONDS,
            )  # fmt: skip
    finally:
        await sim.stop()


def _row(label: str, outcome: Outcome) -> None:
    down = outcome.down[1] - outcome.down[0]
    print(f"  {label:>3} {outcome.messages:8d} {len(outcome.missing):10d} "
          f"{len(outcome.twice):5d} {len(outcome.outside_window):7d} {down:5.1f}s "
          f"{outcome.seconds:6.1f}s")  # fmt: skip
    if outcome.missing or outcome.outside_window:
        print("    FAILED: unanswered " + ", ".join(outcome.missing))
        print("    " + outcome.logs[-3000:].replace("\n", "\n    "))


def _total(outcomes: list[Outcome]) -> None:
    clean = sum(1 for o in outcomes if not o.missing and not o.outside_window)
    messages = sum(o.messages for o in outcomes)
    missing = sum(len(o.missing) for o in outcomes)
    twice = sum(len(o.twice) for o in outcomes)
    outside = sum(len(o.outside_window) for o in outcomes)
    print(f"  total: {clean}/{len(outcomes)} runs with every message answered and no duplicate "
          f"outside the in-flight window; {messages} messages, {missing} unanswered, {twice} "
          f"shown twice ({outside} outside the window)")  # fmt: skip
