"""End to end with the simulator's flood limits on: one send budget per bot, one retry
layer, progress that becomes the reply, and the outbox across a kill.

The simulator's flood windows are scaled down (the same counts per 50 ms instead of per
second) and the adapter declares the same scaled limits, so a load of 600 turns runs in
seconds while every limit still binds."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapters.base import Charges, RateLimit
from adapters.clock import MONOTONIC
from core.store.sqlite import SqliteStore
from gateway.turns.progress import ProgressConfig
from tests.platform_sim.base import SimError, SimMessage
from tests.platform_sim.telegram_sim import ALICE, BOB, FloodLimits, TelegramSim
from tests.support.model_server import (
    ReceivedRequest,
    Reply,
    ScriptedModelServer,
    reply_hang,
    reply_text,
    reply_tool_call,
)
from tests.telegram.harness import Gateway, GatewayFactory, GatewaySetup
from tests.telegram.test_e2e_replay_exact import crash

WINDOW = 0.05
SCALED_FLOOD = FloodLimits(per_chat=20, total=30, window=WINDOW)
SCALED_LIMITS = {
    "bot_limit": RateLimit(30, WINDOW),
    "chat_limit": RateLimit(3, 3 * WINDOW),
    "group_limit": None,
}
BECOMES_REPLY = ProgressConfig(mode="all", becomes_reply=True)
CHATS = 200
ROUNDS = 3


def answer_of(request: ReceivedRequest) -> Reply:
    """Tool turns ("tool …") call ``read_file`` once, then answer; others answer at once."""
    asked = request.last_user_text
    if request.messages[-1].get("role") == "tool":
        return reply_text(f"answer: {asked}")
    if asked.startswith("tool"):
        return reply_tool_call("read_file", {"path": "notes.txt"})
    return reply_text(f"answer: {asked}")


def final_texts(sim: TelegramSim, chat: int) -> list[str]:
    return [m.text for m in sim.bot_messages(chat)]


def answered(sim: TelegramSim, asked: dict[int, str]) -> Callable[[], bool]:
    """A cheap predicate: every chat shows the answer to what it asked (chats found
    answered are not looked at again; the first unanswered one ends the check)."""
    waiting = sorted(asked)

    def check() -> bool:
        while waiting:
            chat = waiting[-1]
            if f"answer: {asked[chat]}" not in final_texts(sim, chat):
                return False
            waiting.pop()
        return True

    return check


async def test_200_chats_times_3_messages_half_tool_turns_zero_429s_each_answered_once(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    telegram_sim.flood = SCALED_FLOOD
    chats = [1000 + n for n in range(CHATS)]
    model_server.script(*[answer_of] * (CHATS * ROUNDS * 2))
    await gateway(
        allowed_users=frozenset(str(c) for c in chats),
        progress=BECOMES_REPLY,
        telegram=SCALED_LIMITS,
    )
    started = time.monotonic()
    for round_ in range(ROUNDS):
        texts = {c: f"{'tool' if c % 2 else 'plain'} {c} #{round_}" for c in chats}
        for chat in chats:
            await telegram_sim.user_says(chat, texts[chat])
        await telegram_sim.wait_for(answered(telegram_sim, texts), timeout=60)
    elapsed = time.monotonic() - started
    assert [c for c in telegram_sim.calls if c.status == 429] == []
    for chat in chats:
        kind = "tool" if chat % 2 else "plain"
        expected = [f"answer: {kind} {chat} #{r}" for r in range(ROUNDS)]
        assert final_texts(telegram_sim, chat) == expected  # once each, nothing else left
        assert all(not m.buttons for m in telegram_sim.bot_messages(chat))
    tool_chat = chats[1]
    edited = [m for m in telegram_sim.bot_messages(tool_chat) if m.history]
    assert len(edited) == ROUNDS  # each tool turn's progress message became its answer
    print(f"\n{CHATS * ROUNDS} turns in {elapsed:.2f}s, {len(telegram_sim.calls)} Bot API calls")


async def test_20_injected_429s_on_one_chunk_make_21_calls_with_each_wait_honoured(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("through the flood"))
    run = await gateway()
    telegram_sim.fail_next("sendMessage", SimError.rate_limit(0.02), times=20)
    await telegram_sim.user_says(ALICE.id, "hello")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "through the flood")
    await run.idle(f"telegram:dm:{ALICE.id}")
    calls = [c for c in telegram_sim.calls_to("sendMessage") if c.params.get("text")]
    assert [c.status for c in calls] == [429] * 20 + [200]
    assert all(b.at - a.at >= 0.02 for a, b in itertools.pairwise(calls))
    assert final_texts(telegram_sim, ALICE.id) == ["through the flood"]


class DiesAt:
    """The real store; the process "dies" (the call never returns) at ``method``."""

    def __init__(self, inner: SqliteStore, method: str) -> None:
        self.inner, self.method = inner, method
        self.reached = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.inner, name)
        if name != self.method:
            return found

        async def dying(*args: Any, **kwargs: Any) -> Any:
            if self.method == "put_outbox":
                await found(*args, **kwargs)  # stored, then killed before sending
            self.reached.set()
            await asyncio.Event().wait()

        return dying


async def run_until_killed(
    sim: TelegramSim, models: ScriptedModelServer, store: SqliteStore, tmp_path: Path, at: str
) -> None:
    dying = DiesAt(store, at)
    workspace = tmp_path / "first-run"
    workspace.mkdir()
    first = Gateway(sim, models, dying, workspace, GatewaySetup())  # type: ignore[arg-type]
    try:
        await first.start()
        said = await sim.user_says(ALICE.id, "what is the answer?")
        await asyncio.wait_for(dying.reached.wait(), 5)
        await crash(first, sim, said.event_id or "")
    finally:
        await first.stop()


async def test_killed_after_the_reply_is_stored_before_it_is_sent_it_is_sent_once_after_restart(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
    tmp_path: Path,
) -> None:
    model_server.script(reply_text("forty-two"))
    await run_until_killed(telegram_sim, model_server, store, tmp_path, "put_outbox")
    assert final_texts(telegram_sim, ALICE.id) == []
    second = await gateway()
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "forty-two")
    await second.adapter.drain()
    await second.idle(f"telegram:dm:{ALICE.id}")
    assert final_texts(telegram_sim, ALICE.id) == ["forty-two"]
    assert len(model_server.requests) == 1  # never generated again


async def test_killed_mid_send_the_reply_arrives_with_at_most_one_duplicate(
    gateway: GatewayFactory,
    telegram_sim: TelegramSim,
    model_server: ScriptedModelServer,
    store: SqliteStore,
    tmp_path: Path,
) -> None:
    model_server.script(reply_text("forty-two"))
    await run_until_killed(telegram_sim, model_server, store, tmp_path, "mark_outbox_sent")
    second = await gateway()
    await second.adapter.drain()
    await second.idle(f"telegram:dm:{ALICE.id}")
    copies = final_texts(telegram_sim, ALICE.id).count("forty-two")
    print(f"\nkill -9 between the platform's accept and the mark: {copies - 1} duplicate(s)")
    assert 1 <= copies <= 2 and len(model_server.requests) == 1


async def test_a_progress_delete_stuck_behind_the_budget_never_delays_the_next_turn(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("read_file", {"path": "a.txt"}), reply_text("first"), reply_text("second")
    )
    # two calls in the chat per 30 s, deletes counted: the progress message and the reply;
    # on the real clock, so the 30 s are never skipped (and never waited for)
    stuck = {
        "chat_limit": RateLimit(2, 30.0), "bot_limit": None, "group_limit": None,
        "charges": Charges(chat=frozenset({"send", "delete"})),
    }  # fmt: skip
    long_turns = ProgressConfig(mode="all", becomes_reply=True, new_message_after=0.0)
    run = await gateway(progress=long_turns, telegram=stuck, clock=MONOTONIC)
    await telegram_sim.user_says(ALICE.id, "one")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "first")
    await run.idle(f"telegram:dm:{ALICE.id}")
    assert telegram_sim.calls_to("deleteMessage") == []  # waits for budget (30 s)
    asked = time.monotonic()
    await telegram_sim.user_says(ALICE.id, "two")
    [*_, second] = await model_server.wait_for_requests(3, timeout=5)
    assert second.last_user_text == "two" and second.at - asked < 2.0


GROUP = -100500


def stop_data(message: SimMessage) -> str:
    [button] = [b for b in message.buttons if b.data.startswith("st:")]
    return button.data


async def answer_to(sim: TelegramSim, query_id: str) -> str:
    answer = await sim.wait_for(lambda: sim.answers.get(query_id))
    return str(answer.get("text"))


async def test_the_stop_button_stops_only_its_own_turn_and_only_for_the_requester(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    telegram_sim.add_group(GROUP)
    thinking = asyncio.Event()
    model_server.script(
        reply_tool_call("read_file", {"path": "a.txt"}),
        reply_hang(reply_text("never sent"), until=thinking),
        reply_tool_call("read_file", {"path": "b.txt"}),
        reply_hang(reply_text("second answer"), until=thinking),
    )
    run = await gateway(progress=BECOMES_REPLY)
    key = f"telegram:group:{GROUP}:{ALICE.id}"
    await telegram_sim.user_says(GROUP, "@test_bot first", user=ALICE)
    old = await telegram_sim.wait_for_bot_message(GROUP, lambda m: "a.txt" in m.text)
    data = stop_data(old)
    stranger = await telegram_sim.press_button(old, data, user=BOB)
    assert "only the person who asked" in await answer_to(telegram_sim, stranger)
    assert run.service.dispatcher.status(key).running
    pressed = await telegram_sim.press_button(old, data, user=ALICE)
    assert await answer_to(telegram_sim, pressed) == "⏹ Stopped."
    await run.idle(key)
    stopped = await telegram_sim.wait_for_bot_message(GROUP, lambda m: "Stopped" in m.text)
    assert stopped.id == old.id and stopped.buttons == []

    await telegram_sim.user_says(GROUP, "@test_bot second", user=ALICE)
    await telegram_sim.wait_for_bot_message(GROUP, lambda m: "b.txt" in m.text)
    late = await telegram_sim.press_button(old, data, user=ALICE, seen=old.history[0])
    assert await answer_to(telegram_sim, late) == "This button is no longer valid."
    assert run.service.dispatcher.status(key).running  # the newer turn goes on
    thinking.set()
    await telegram_sim.wait_for_bot_message(GROUP, lambda m: m.text == "second answer")
