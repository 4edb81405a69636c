"""``python -m bench press``: Telegram button press → reply, and the end of a tool turn.

The whole gateway in this process (the Telegram test harness: real PTB, the scripted model
server over 127.0.0.1, SQLite) against the Telegram simulator with its flood limits on
(20 a second per chat, 30 in all), on the real clock with Telegram's real limits declared
(``adapters.telegram.adapter``: 3 messages per 3 s in a chat, 30 a second per bot).

- **press → reply**: a DM asks for ``rm -rf``, the approval card shows, the user presses
  Approve or Deny, the model answers at once; measured from the press to the reply's
  ``sendMessage`` reaching the simulator. Each press is in its own chat (a fresh budget,
  as when a user answers a card), one after the other with a pause (``GAP``) that keeps
  the whole bot under Telegram's 30 messages a second.
- **tool turn end**: a two-step tool turn long enough for "typing…" (the first model
  reply takes 1.2 s); measured from the model's final request to the reply reaching the
  simulator.

Printed: p50/p95 of each (docs/architecture.md, "The outbound scheduler").
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from adapters.clock import MONOTONIC
from bench.figures import percentile
from bench.sizes import Sizes
from core.store.sqlite import open_store
from tests.platform_sim.base import Call, SimMessage
from tests.platform_sim.telegram_sim import TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call
from tests.telegram.harness import Gateway, GatewaySetup

FIRST_CHAT = 20_000
APPROVE, DENY = "✅ Approve", "❌ Deny"
SLOW_STEP = 1.2
"""Seconds the first model reply of a tool turn takes: past the typing delay (1 s)."""
GAP = 0.35
"""Seconds between two rounds: each makes ~5 message calls, and back to back they would
pass the bot's 30 a second, which then (rightly) paces them."""


def _setup(chats: range) -> GatewaySetup:
    setup = GatewaySetup(allowed_users=frozenset(str(c) for c in chats))
    if "clock" in {f.name for f in fields(GatewaySetup)}:
        setup = replace(setup, clock=MONOTONIC)  # the real clock, the real limits
    return setup


def _sent(sim: TelegramSim, chat: int, text: str) -> Callable[[], Call | None]:
    def find() -> Call | None:
        for call in reversed(sim.calls):
            params, ok = call.params, call.method == "sendMessage" and call.status == 200
            if ok and params.get("text") == text and str(params.get("chat_id")) == str(chat):
                return call
        return None

    return find


async def _press_once(sim: TelegramSim, chat: int, label: str) -> float:
    """One card answered with ``label``: ms from the press to the reply's arrival."""
    await sim.user_says(chat, f"clean up {chat}")
    card: SimMessage = await sim.wait_for_bot_message(
        chat, lambda m: "Approval needed" in m.text and bool(m.buttons), 30
    )
    pressed = time.monotonic()
    await sim.press_button(card, card.button(label).data or "")
    reply = await sim.wait_for(_sent(sim, chat, f"done {chat}"), 30)
    await asyncio.sleep(GAP)
    return (reply.at - pressed) * 1000


async def _tool_turn_end(sim: TelegramSim, models: ScriptedModelServer, chat: int) -> float:
    """One slow tool turn: ms from the model's final request to the reply's arrival."""
    before = len(models.requests)
    await sim.user_says(chat, f"read the notes {chat}")
    reply = await sim.wait_for(_sent(sim, chat, f"done {chat}"), 30)
    final = models.requests[before + 2]
    return (reply.at - final.at) * 1000


def _script(models: ScriptedModelServer, chats: range, *, slow: bool) -> None:
    replies: list[Any] = []
    for chat in chats:
        if slow:
            first = reply_tool_call("read_file", {"path": "notes.txt"}, delay=SLOW_STEP)
            replies += [first, reply_tool_call("read_file", {"path": "more.txt"})]
        else:
            replies.append(reply_tool_call("terminal", {"command": f"rm -rf ./gone-{chat}"}))
        replies.append(reply_text(f"done {chat}"))
    models.script(*replies)


def _line(name: str, values: list[float]) -> None:
    p50, p95 = percentile(values, 0.5), percentile(values, 0.95)
    print(f"  {name:<24} p50 {p50:8.1f} ms   p95 {p95:8.1f} ms   ({len(values)} runs)")


async def run(sizes: Sizes) -> None:
    presses = max(4, sizes.stops // 2)
    turns = max(2, sizes.stops // 10)
    chats = range(FIRST_CHAT, FIRST_CHAT + 2 * presses + turns)
    sim, models = TelegramSim(), ScriptedModelServer()
    await sim.start()
    await models.start()
    try:
        with tempfile.TemporaryDirectory(prefix="commonos-bench-") as folder:
            root = Path(folder)
            (root / "workspace").mkdir()
            store = await open_store(root / "store.db")
            gateway = Gateway(sim, models, store, root / "workspace", _setup(chats))
            await gateway.start()
            try:
                results = await _measure(sim, models, chats, presses)
            finally:
                await gateway.stop()
                await store.close()
    finally:
        await models.stop()
        await sim.stop()
    limited = sum(1 for c in sim.calls if c.status == 429)
    print("\nTelegram press → reply (simulator flood limits on, real clock)")
    for name, values in results.items():
        _line(name, values)
    print(f"  429s received            {limited}")


async def _measure(
    sim: TelegramSim, models: ScriptedModelServer, chats: range, presses: int
) -> dict[str, list[float]]:
    approve, deny, turns = chats[:presses], chats[presses : 2 * presses], chats[2 * presses :]
    _script(models, approve, slow=False)
    approved = [await _press_once(sim, chat, APPROVE) for chat in approve]
    _script(models, deny, slow=False)
    denied = [await _press_once(sim, chat, DENY) for chat in deny]
    _script(models, turns, slow=True)
    ends = [await _tool_turn_end(sim, models, chat) for chat in turns]
    return {"Approve → reply": approved, "Deny → reply": denied, "tool turn end → reply": ends}
