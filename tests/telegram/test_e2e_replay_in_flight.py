"""Exactly once on Telegram, as far as the Bot API allows: it has no idempotency key, so a
``sendMessage`` the gateway was killed in (Telegram posted it, the answer never came back)
is sent again after the restart — at most once more, and never generated again. The window
is kept to the call itself: a chunk is marked started just before the request and sent just
after the answer; its size is measured here (docs/architecture.md, "Exactly once")."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core.store.sqlite import SqliteStore
from tests.platform_sim.base import Json, SimMessage
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.killed_run import kill_in_flight, outbox, restarted, settled, write_config
from tests.support.model_server import ReceivedRequest, Reply, ScriptedModelServer, reply_text
from tests.telegram.harness import Gateway, GatewaySetup

QUESTION = "what is 6 x 7?"
ANSWER = "Forty-two, at most twice."
MEASURED = 40


@pytest.fixture
def home(tmp_path: Path, telegram_sim: TelegramSim, model_server: ScriptedModelServer) -> Path:
    write_config(tmp_path, model_server, f"""
[telegram]
token = "{telegram_sim.token}"
base_url = "{telegram_sim.url}/bot"
base_file_url = "{telegram_sim.url}/file/bot"
allowed_users = [{ALICE.id}]
""")  # fmt: skip
    return tmp_path


def the_answer(params: Json) -> bool:
    return params.get("text") == ANSWER


async def test_killed_while_the_reply_is_in_flight_it_is_sent_at_most_once_more_never_generated(
    home: Path, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text(ANSWER))
    hold = telegram_sim.hold_next("sendMessage", the_answer)
    await kill_in_flight(home, hold, lambda: telegram_sim.user_says(ALICE.id, QUESTION))
    assert outbox(home) == [(None, True)]  # in flight: started, not known sent

    async with restarted(home):
        await settled(home, "telegram")
    copies = [m.text for m in telegram_sim.bot_messages(ALICE.id)].count(ANSWER)
    assert copies == 2  # Telegram had it; no key tells it so: sent once more, not more
    [(message_id, _)] = outbox(home)
    assert message_id is not None
    assert len(model_server.requests) == 1  # the reply came from the store


class TimedMarks:
    """The real store; records when each chunk's started and sent marks were written."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner
        self.started: dict[tuple[str, int], float] = {}
        self.sent: dict[tuple[str, int], float] = {}
        self.texts: dict[str, tuple[str, int]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def put_outbox(self, chunks: Any) -> Any:
        stored = await self.inner.put_outbox(chunks)
        self.texts.update({c.text: (c.turn_id, c.index) for c in stored})
        return stored

    async def mark_outbox_started(self, turn_id: str, index: int) -> None:
        await self.inner.mark_outbox_started(turn_id, index)
        self.started[(turn_id, index)] = time.monotonic()

    async def mark_outbox_sent(self, turn_id: str, index: int, message_id: str) -> None:
        await self.inner.mark_outbox_sent(turn_id, index, message_id)
        self.sent[(turn_id, index)] = time.monotonic()


def answer(request: ReceivedRequest) -> Reply:
    return reply_text(f"answer: {request.last_user_text}")


def has_text(text: str) -> Callable[[SimMessage], bool]:
    return lambda message: message.text == text


def ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    return f"p50 {statistics.median(ordered) * 1000:.2f} ms, p95 {p95 * 1000:.2f} ms, " \
           f"max {ordered[-1] * 1000:.2f} ms"  # fmt: skip


async def test_the_duplicate_window_is_the_send_call_itself(
    telegram_sim: TelegramSim, model_server: ScriptedModelServer, store: SqliteStore,
    tmp_path: Path,
) -> None:  # fmt: skip
    """A kill between Telegram taking the message and the sent mark duplicates it: measured
    from the request's arrival at the simulator to the mark written, per reply."""
    model_server.script(*[answer] * MEASURED)
    timed = TimedMarks(store)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    run = Gateway(telegram_sim, model_server, timed, workspace, GatewaySetup())  # type: ignore[arg-type]
    try:
        await run.start()
        for n in range(MEASURED):
            await telegram_sim.user_says(ALICE.id, f"question {n}")
            await telegram_sim.wait_for_bot_message(ALICE.id, has_text(f"answer: question {n}"))
            await run.idle(f"telegram:dm:{ALICE.id}")
    finally:
        await run.stop()
    sends = {str(c.params.get("text")): c.arrived for c in telegram_sim.calls_to("sendMessage")}
    duplicate, before = [], []
    for text, chunk in timed.texts.items():
        duplicate.append(timed.sent[chunk] - sends[text])
        before.append(sends[text] - timed.started[chunk])
    print(f"\nTelegram duplicate window (request at the sim -> sent mark written), "
          f"{MEASURED} replies: {ms(duplicate)}")  # fmt: skip
    print(f"started mark -> request at the sim: {ms(before)}")
    assert len(duplicate) == MEASURED
    assert max(duplicate) < 2.0  # the call and one store write, never a wait behind others
