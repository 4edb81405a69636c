"""A chat's settings follow it from process to process (docs/cluster.md): two real
``commonos run`` processes on one PostgreSQL database and one Telegram bot.

A session's lease is released whenever the session is idle, so its next event may run on
the other process (claim-or-forward gives a free session to the least busy one, the
receiving process on a tie). ``/model`` chosen while the chat ran on one process must be
the model the other process asks for when the chat comes back to it, though that process
read the chat's settings before.

Where each event runs is made certain, not hoped for: before each step the test waits
until the session leases are as the step needs (read from the ``leases`` table).
"""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

from tests.cluster.answers import Answers, is_answer_to
from tests.cluster.harness import Cluster, eventually, running_cluster
from tests.cluster.processes import TIMEOUT, cluster_config, telegram_section
from tests.platform_sim.telegram_sim import TelegramSim
from tests.support.model_server import ScriptedModelServer

CHAT, BUSY = 20_001, 20_002
FAST = "fast-scripted"
PRESET = f"""
[models.fast]
model = "{FAST}"
"""


async def test_a_model_chosen_on_one_process_is_used_when_the_chat_returns_to_the_other(
    pg_url: str, telegram_sim: TelegramSim, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    answers = Answers(model_server)
    answers.install(10)
    release = asyncio.Event()
    chats = telegram_section(telegram_sim, [CHAT, BUSY])
    config = cluster_config(pg_url, model_server.url, chats + PRESET)
    async with running_cluster(pg_url, tmp_path, config) as cluster:
        await cluster.prepare("b")  # imports while a starts
        await cluster.start("a")
        owner = (await cluster.owner_of("telegram")).process_id
        await cluster.start("b")

        async def answered(text: str, *, held: bool = False, chat: int = CHAT) -> None:
            found = telegram_sim.wait_for_bot_message(chat, is_answer_to(text, held=held), TIMEOUT)
            await cluster.expect(found, f"the answer to {text!r}")

        async def leases_are(wanted: dict[int, str]) -> None:
            await eventually(partial(_leases_are, cluster, wanted), TIMEOUT, f"leases {wanted}")

        # Every session free: the chat's first message runs on the bot's owner (the tie
        # goes to the process that received it), which reads the chat's settings.
        await telegram_sim.user_says(CHAT, "first")
        await answered("first")
        await leases_are({})

        # The owner busy with another chat, the chat free: its /model goes to the other
        # process, the least busy.
        answers.hold("hold", release)
        await telegram_sim.user_says(BUSY, "hold")
        await leases_are({BUSY: owner})
        await telegram_sim.user_says(CHAT, "/model fast")
        switched = telegram_sim.wait_for_bot_message(
            CHAT, lambda m: m.text.startswith("🧠 Model: fast"), TIMEOUT
        )
        await cluster.expect(switched, "the /model reply")
        release.set()
        await answered("hold", held=True, chat=BUSY)
        await leases_are({})

        # Every session free again: the chat comes back to the owner.
        await telegram_sim.user_says(CHAT, "second")
        await answered("second")
        turns = [t for t in await cluster.turns() if t.session_key == f"telegram:dm:{CHAT}"]

    asked = [r.body["model"] for r in model_server.requests if r.last_user_text == "second"]
    assert [t.process_id for t in turns] == [owner, owner], cluster.logs()
    assert asked == [FAST], cluster.logs()


async def _leases_are(cluster: Cluster, wanted: dict[int, str]) -> bool:
    """Whether the live session leases are exactly ``wanted`` (chat: holder)."""
    rows = await (await cluster.db()).fetch(
        "SELECT name, owner FROM leases WHERE name LIKE 'session:%' "
        "AND expires_at > clock_timestamp()"
    )
    held = {row["name"]: row["owner"] for row in rows}
    return held == {f"session:telegram:dm:{chat}": who for chat, who in wanted.items()}
