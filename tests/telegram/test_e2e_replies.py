"""End to end: what the final reply looks like on Telegram, and that it always arrives."""

from __future__ import annotations

import asyncio

from tests.platform_sim.base import SimError
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import (
    ScriptedModelServer,
    reply_hang,
    reply_text,
    reply_tool_call,
)
from tests.telegram.harness import GatewayFactory, replies

KEY = f"telegram:dm:{ALICE.id}"
CODE = [f"print('line {n:03d} of the long listing')" for n in range(110)]
LONG_REPLY = (
    "Here is the script you asked for. " * 15
    + "\n\n```python\n" + "\n".join(CODE) + "\n```\n\n"
    + "Run it with `python listing.py`. " * 15
)  # fmt: skip


def sent_texts(sim: TelegramSim) -> list[str]:
    return [m.text for m in sim.bot_messages(ALICE.id)]


async def test_long_reply_with_a_code_block_arrives_as_two_valid_messages(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    assert 5000 <= len(LONG_REPLY) < 8000
    model_server.script(reply_text(LONG_REPLY))
    run = await gateway()
    await telegram_sim.user_says(ALICE.id, "write me a long listing")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "python listing.py" in m.text)
    await run.idle(KEY)
    messages = telegram_sim.bot_messages(ALICE.id)
    assert len(messages) == 2
    for message in messages:
        assert any(e["type"] == "pre" for e in message.raw.get("entities", []))
    shown_code = [line for m in messages for line in m.text.splitlines() if "long listing" in line]
    assert shown_code == CODE


async def test_malformed_markdown_still_arrives(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    broken = "Done **but unclosed, a <tag> & `stray tick, [half](link and _mixed* marks"
    model_server.script(reply_text(broken))
    await gateway()
    await telegram_sim.user_says(ALICE.id, "go")
    reply = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "unclosed" in m.text)
    for fragment in ("but unclosed", "<tag> &", "`stray tick", "[half](link", "mixed"):
        assert fragment in reply.text


async def test_reply_rejected_as_bad_markup_arrives_as_plain_text(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_text("Result: **42** (see `answer`)"))
    await gateway()
    rejected = 'Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 8'
    telegram_sim.fail_next("sendMessage", SimError.platform(rejected))
    await telegram_sim.user_says(ALICE.id, "compute")
    reply = await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "Result" in m.text)
    assert "42" in reply.text and "answer" in reply.text
    first, second = telegram_sim.calls_to("sendMessage")
    assert (first.status, first.params.get("parse_mode")) == (400, "HTML")
    assert (second.status, second.params.get("parse_mode")) == (200, None)


async def test_injected_429s_delay_but_never_lose_a_message(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("terminal", {"command": "echo working"}), reply_text("Finished anyway.")
    )
    run = await gateway()
    telegram_sim.fail_next("sendMessage", SimError.rate_limit(0.1), times=6)  # > PTB's retries
    await telegram_sim.user_says(ALICE.id, "do it despite flood control")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Finished anyway.")
    await run.idle(KEY)
    limited = [c for c in telegram_sim.calls if c.status == 429]
    assert len(limited) == 6
    assert len(replies(telegram_sim, ALICE.id, "Finished anyway.")) == 1
    [progress] = replies(telegram_sim, ALICE.id, "terminal")
    assert "echo working" in progress.text and "Done" in progress.text


async def test_injected_429s_on_edits_and_the_final_reply_delay_but_lose_nothing(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    answer = asyncio.Event()
    model_server.script(
        reply_tool_call("terminal", {"command": "echo working"}),
        reply_hang(reply_text("Finished anyway."), until=answer),
    )
    run = await gateway()
    await telegram_sim.user_says(ALICE.id, "do it despite flood control")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "echo working" in m.text)
    telegram_sim.fail_next("sendMessage", SimError.rate_limit(0.05), times=9)  # > PTB's retries
    telegram_sim.fail_next("editMessageText", SimError.rate_limit(0.05), times=9)
    answer.set()
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "Finished anyway.")
    await run.idle(KEY)
    limited = {c.method for c in telegram_sim.calls if c.status == 429}
    assert limited == {"sendMessage", "editMessageText"}
    assert len(replies(telegram_sim, ALICE.id, "Finished anyway.")) == 1
    [progress] = replies(telegram_sim, ALICE.id, "terminal")
    assert "echo working" in progress.text and "Done" in progress.text
