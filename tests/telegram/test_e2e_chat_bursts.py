"""End to end: one person's answers as fast as Telegram allows. The simulator enforces
Telegram's per-chat behaviour (``ChatBursts``: a short burst, then about one message a
second, then 429 with ``retry_after``); the gateway keeps to it with its default budget
(``[telegram] chat_burst``), on the harness's test clock (no test waits a flood window);
status reactions take no place in the chat's budget."""

from __future__ import annotations

import itertools

from adapters.base import RateLimit
from adapters.clock import MONOTONIC
from adapters.telegram.platform import CHAT_BURST
from core.debounce import Pace
from gateway.turns.progress import ProgressConfig
from tests.platform_sim.telegram_sim import ALICE, BOB, ChatBursts, FloodLimits, TelegramSim
from tests.support.clock import TestClock
from tests.support.manual_clock import ManualClock
from tests.support.model_server import ReceivedRequest, Reply, ScriptedModelServer, reply_text
from tests.support.polling import until
from tests.telegram.harness import GatewayFactory
from tests.telegram.test_e2e_reactions import reactions_on

KEY = f"telegram:dm:{ALICE.id}"
MESSAGES = 10
QUIET = ProgressConfig(mode="off")


def echo(request: ReceivedRequest) -> Reply:
    return reply_text(f"answer: {request.last_user_text}")


async def test_one_chat_times_10_gets_a_burst_at_once_then_one_a_second_and_no_429(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    telegram_sim.flood = FloodLimits(chat_bursts=ChatBursts(burst=CHAT_BURST, per_second=1.0))
    model_server.script(*[echo] * MESSAGES)
    run = await gateway(progress=QUIET)
    assert isinstance(run.clock, TestClock)
    waited = []  # seconds of pacing skipped by the time each answer arrived
    for n in range(MESSAGES):
        await telegram_sim.user_says(ALICE.id, f"q{n}")
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m, n=n: m.text == f"answer: q{n}")  # type: ignore[misc]
        waited.append(run.clock.skipped)
    assert waited[:CHAT_BURST] == [0.0] * CHAT_BURST  # the burst: no answer waited
    paced = [later - earlier for earlier, later in itertools.pairwise(waited[CHAT_BURST - 1 :])]
    assert all(0.5 < gap <= 1.0 for gap in paced), paced  # then about one a second
    assert [c.status for c in telegram_sim.calls_to("sendMessage")] == [200] * MESSAGES


async def test_three_merged_messages_get_their_reactions_and_the_reply_at_once(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    """One message an hour in the chat, on the real clock: three 👀 before the reply, and
    the reply still goes — had a reaction taken the budget, the reply would wait an hour."""
    model_server.script(reply_text("All three, then."))
    clock = ManualClock()
    one_an_hour = {"chat_limit": RateLimit(1, 3600.0, burst=1), "bot_limit": None}
    run = await gateway(
        progress=ProgressConfig(mode="off", reactions=True), telegram=one_an_hour,
        clock=MONOTONIC, debounce_ms=500, debounce=Pace(clock.now, clock.sleep),
    )  # fmt: skip
    said = []
    for count, text in enumerate(("one", "two", "three"), start=1):
        said.append(await telegram_sim.user_says(ALICE.id, text))
        await until(lambda n=count: run.service.dispatcher.status(KEY).gathering == n)  # type: ignore[misc]
        await clock.advance(0.1)
    await clock.advance(0.5)
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "All three, then.")
    for message in said:
        await until(lambda m=message: reactions_on(telegram_sim, m.id) == ["👀", "👍"])  # type: ignore[misc]
    assert [c.status for c in telegram_sim.calls_to("sendMessage")] == [200]


async def test_past_telegrams_burst_the_429s_retry_after_is_obeyed_for_that_chat(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    """A budget bolder than Telegram (10 at once, one a second, against its 2 at once, one
    in two seconds): the real 429 body's ``retry_after`` (2) is waited out, on the test
    clock, before that chat's next call; another chat is not held."""
    telegram_sim.flood = FloodLimits(chat_bursts=ChatBursts(burst=2, per_second=0.5))
    model_server.script(*[echo] * 5)
    await gateway(progress=QUIET, telegram={"chat_limit": RateLimit(1, 1.0, burst=10)})
    for n in range(4):
        await telegram_sim.user_says(ALICE.id, f"q{n}")
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m, n=n: m.text == f"answer: q{n}")  # type: ignore[misc]
    await telegram_sim.user_says(BOB.id, "me too")
    await telegram_sim.wait_for_bot_message(BOB.id, lambda m: m.text == "answer: me too")
    sends = telegram_sim.calls_to("sendMessage")
    alice = [c for c in sends if c.params["chat_id"] == ALICE.id]
    refused = [n for n, c in enumerate(alice) if c.status == 429]
    assert refused and len([c for c in alice if c.status == 200]) == 4
    for n in refused:  # each refusal's wait, whole seconds as Telegram says, kept
        assert alice[n + 1].at - alice[n].at >= 2.0
    assert [c.status for c in sends if c.params["chat_id"] == BOB.id] == [200]
