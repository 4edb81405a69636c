"""PostgreSQL stopped mid-run under two ``commonos run`` processes (issue 28 "Done when",
docs/cluster.md §8): every message answered, none lost; on Telegram a reply shows twice
only inside the in-flight window (counted). The scenario is tests/cluster/outage.py; this
is one run of modest size (30 messages, 3 s down: still past the 2 s leases, so bots and
sessions change hands), ``python -m bench outage`` runs the issue's size (60 messages,
5 s) ten times in a row.
"""

from __future__ import annotations

from pathlib import Path

from tests.cluster.outage import outage_run
from tests.platform_sim.telegram_sim import TelegramSim
from tests.support.model_server import ScriptedModelServer
from tests.support.postgres import PostgresServer

CHATS = 10
PER_CHAT = 3
DOWN_SECONDS = 3.0
TIMEOUT = 40.0
"""Below pytest-timeout's 60 s, so a stall fails with the logs."""


async def test_postgres_stopped_mid_run_every_message_answered_none_lost(
    pg_server: PostgresServer,
    pg_url: str,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:
    outcome = await outage_run(
        pg_server, pg_url, telegram_sim, model_server, tmp_path,
        chats=CHATS, per_chat=PER_CHAT, down_seconds=DOWN_SECONDS, timeout=TIMEOUT,
    )  # fmt: skip
    print(f"\nPostgreSQL down {outcome.down[1] - outcome.down[0]:.1f} s in {outcome.messages} "
          f"messages over 2 processes: {len(outcome.missing)} unanswered, {len(outcome.twice)} "
          f"shown twice ({len(outcome.outside_window)} outside the in-flight window); "
          f"{outcome.seconds:.1f} s")  # fmt: skip

    assert outcome.missing == [], f"{outcome.rows}\n{outcome.logs}"
    assert outcome.outside_window == {}, outcome.logs
