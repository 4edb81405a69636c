"""Two real ``commonos run`` processes on one PostgreSQL database and one Telegram bot
(issue 23 "Done when", docs/cluster.md), through the real python-telegram-bot against
the Telegram simulator, with the scripted model server.

* Exactly one process polls (the simulator saw no two getUpdates in flight at once and
  no 409), both run turns (``turns.process_id`` holds both ids), 300 messages over 50
  chats are each answered exactly once, and no two turns of one session overlap (the
  stored turn rows).
* ``/stop`` sent while a turn runs on the process that does not own the bot reaches it
  through the owner (claim-or-forward) and ends the turn within a second.

The schedule: the gateway paces a Telegram chat at 3 messages per 3 s and the bot at 30
a second (adapters/telegram/adapter.py CHAT_LIMIT, BOT_LIMIT), so each of the 50 chats
sends its next message once the previous one is answered (6 each), and the 300 answers
take about 10 s of the bot's budget.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.cluster.answers import (
    Answers,
    answer_counts,
    is_answer_to,
)
from tests.cluster.harness import (
    Cluster,
    TurnRow,
    concurrent_turns,
    eventually,
    running_cluster,
    turn_on_the_other_process,
)
from tests.cluster.processes import (
    TIMEOUT,
    cluster_config,
    telegram_section,
)
from tests.platform_sim.telegram_sim import TelegramSim
from tests.support.model_server import ScriptedModelServer

FIRST_CHAT = 10_000
CHATS = 50
PER_CHAT = 6


def session_key(chat: int) -> str:
    return f"telegram:dm:{chat}"


async def converse(sim: TelegramSim, chat: int, texts: list[str]) -> None:
    """Say each text in turn, the next once the previous one's answer is shown."""
    for text in texts:
        await sim.user_says(chat, text)
        await sim.wait_for_bot_message(chat, is_answer_to(text), timeout=TIMEOUT)


async def test_two_processes_one_bot_one_poller_both_run_turns_each_message_answered_once(
    pg_url: str, telegram_sim: TelegramSim, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    chats = [FIRST_CHAT + n for n in range(CHATS)]
    said = {chat: [f"plain-{chat}-{n}" for n in range(PER_CHAT)] for chat in chats}
    answers = Answers(model_server)
    answers.install(CHATS * PER_CHAT * 2)
    config = cluster_config(pg_url, model_server.url, telegram_section(telegram_sim, chats))
    async with running_cluster(pg_url, tmp_path, config) as cluster:
        await cluster.prepare("b")  # imports while a starts
        first = await cluster.start("a")
        owner = await cluster.bot_owner("telegram")
        second = await cluster.start("b")
        started = time.monotonic()
        talks = asyncio.gather(*(converse(telegram_sim, chat, said[chat]) for chat in chats))
        await cluster.expect(talks, "300 messages answered")
        seconds = time.monotonic() - started
        turns = await cluster.turns()
        final = await cluster.bot_lease("telegram")
    print(f"\n300 answers by 2 processes in {seconds:.1f} s ({300 / seconds:.1f}/s); turns per "
          f"process {_per_process(turns)}; getUpdates {len(telegram_sim.polls)} over "
          f"{len({p.peer for p in telegram_sim.polls})} connection(s)")  # fmt: skip

    assert owner.owner == first.process_id and final is not None
    assert (final.owner, final.epoch) == (owner.owner, owner.epoch), "the bot changed hands"
    assert telegram_sim.overlapping_polls() == [], "two processes polled at once"
    assert telegram_sim.poll_conflicts() == [], "the simulator answered 409 Conflict"
    assert set(_per_process(turns)) == {first.process_id, second.process_id}, cluster.logs()
    for chat in chats:
        counts = answer_counts(telegram_sim.messages(chat), said[chat])
        assert set(counts.values()) == {1}, f"chat {chat}: {counts}"
        assert len(telegram_sim.bot_messages(chat)) == PER_CHAT
    assert concurrent_turns(turns) == []
    assert len(turns) == CHATS * PER_CHAT and {t.status for t in turns} == {"completed"}
    assert set(answers.counts().values()) == {1}, "a message's model call was made twice"


def _per_process(turns: list[TurnRow]) -> dict[str | None, int]:
    counts: dict[str | None, int] = {}
    for turn in turns:
        counts[turn.process_id] = counts.get(turn.process_id, 0) + 1
    return counts


async def test_stop_sent_to_the_process_not_running_the_turn_ends_it_within_a_second(
    pg_url: str, telegram_sim: TelegramSim, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    chats = [FIRST_CHAT + n for n in range(3)]
    answers = Answers(model_server)
    answers.install(20)
    release = asyncio.Event()
    config = cluster_config(pg_url, model_server.url, telegram_section(telegram_sim, chats))
    async with running_cluster(pg_url, tmp_path, config) as cluster:
        await cluster.prepare("b")  # imports while a starts
        await cluster.start("a")
        owner = await cluster.owner_of("telegram")
        await cluster.start("b")
        chat, turn = await turn_on_the_other_process(
            cluster, telegram_sim, owner, answers, chats, release
        )

        stop_sent = time.time()
        await telegram_sim.user_says(chat, "/stop")
        ended = await eventually(lambda: _finished(cluster, turn.id), 5.0, "the turn's end")
        seconds = ended.finished_at - stop_sent if ended.finished_at else float("inf")
        print(f"\n/stop via the bot's owner to the turn's process: the turn ended "
              f"{seconds * 1000:.0f} ms after the /stop update ({ended.status}, "
              f"{ended.exit_reason})")  # fmt: skip
        release.set()
        for other in chats[: chats.index(chat)]:  # the owner's held turns, answered now
            answered = is_answer_to(f"hold-{other}", held=True)
            await cluster.expect(
                telegram_sim.wait_for_bot_message(other, answered, TIMEOUT),
                "the held turns answered once released",
            )
    assert seconds <= 1.0, cluster.logs()
    assert ended.status != "completed" and ended.process_id != owner.process_id
    assert not any(m.text.startswith("answer:") for m in telegram_sim.bot_messages(chat))


async def _finished(cluster: Cluster, turn_id: str) -> TurnRow | None:
    turns = await cluster.turns()
    return next((t for t in turns if t.id == turn_id and t.finished_at is not None), None)
