"""End to end: live progress is one message, edited in place at the platform's pace."""

from __future__ import annotations

import itertools

from tests.platform_sim.base import Call, SimMessage
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import (
    ScriptedModelServer,
    reply_text,
    reply_tool_call,
    reply_tool_calls,
)
from tests.telegram.harness import GatewayFactory, replies

EDIT_INTERVAL = 0.25


def wrote_progress(call: Call, progress: SimMessage) -> bool:
    """A successful send of the progress message, or an edit of it."""
    if call.status != 200:
        return False
    if call.method == "sendMessage":
        return "terminal" in str(call.params.get("text"))
    return call.method == "editMessageText" and call.params.get("message_id") == int(progress.id)


async def test_progress_is_one_message_edited_no_faster_than_the_edit_interval(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("terminal", {"command": "sleep 0.1; echo one"}, id="c1"),
        reply_tool_calls(
            [("c2", "terminal", {"command": "echo two"}), ("c3", "read_file", {"path": "x"})]
        ),
        reply_tool_call("terminal", {"command": "sleep 0.1; echo three"}, id="c4"),
        reply_text("All three ran."),
    )
    run = await gateway(edit_interval=EDIT_INTERVAL)
    await telegram_sim.user_says(ALICE.id, "run the three steps")
    await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: m.text == "All three ran.")
    await run.idle(f"telegram:dm:{ALICE.id}")
    [progress] = replies(telegram_sim, ALICE.id, "terminal")
    writes = [call.at for call in telegram_sim.calls if wrote_progress(call, progress)]
    assert len(writes) == len(progress.history) + 1 >= 2
    gaps = [later - earlier for earlier, later in itertools.pairwise(writes)]
    assert min(gaps) >= EDIT_INTERVAL - 0.01, gaps
    for shown in ("echo one", "echo two", "read_file", "echo three", "Done — 4 steps"):
        assert shown in progress.text
    assert progress.text.index("echo two") < progress.text.index("echo three")
