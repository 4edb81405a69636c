"""``/compact`` in the gateway runs in the session's Dispatcher lane (issue 28 point 6):
``/stop`` cancels its summary call, and a message sent meanwhile never waits for it
(``docs/turn-loop.md`` §18), through the router on real parts (SQLite, CommonAgent)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.agent.profile import AgentProfile
from tests.gateway.conftest import running  # noqa: F401  (the gateway fixture)
from tests.gateway.fakes import ScriptedModel, Step, event
from tests.gateway.harness import ALICE, GatewayFactory


async def requests_reach(model: ScriptedModel, count: int) -> None:
    while len(model.requests) < count:
        model.called.clear()
        await asyncio.wait_for(model.called.wait(), 5)


async def test_stop_ends_a_compact_and_the_message_sent_meanwhile_never_waits(
    running: GatewayFactory,  # noqa: F811
    tmp_path: Path,
) -> None:
    held = asyncio.Event()  # never set: the summary call hangs until /stop
    steps = [Step(f"answer {n}") for n in range(4)]
    steps += [Step("the summary", gate=held), Step("after the stop")]
    profile = AgentProfile(workspace=tmp_path, context_window=32768)
    async with running(*steps, profile=profile) as gw:
        for number in range(4):
            await gw.say(ALICE, f"message {number}")
            await gw.idle()
        await asyncio.wait_for(gw.say(ALICE, "/compact"), 5)  # answered in the lane
        await requests_reach(gw.model, 5)
        await gw.say(ALICE, "sent during /compact")

        await gw.say(ALICE, "/stop")
        await gw.idle()  # bounded (5 s): the held summary call did not hold the lane

        assert "⏹ Stopped. 1 queued message was not run." in gw.adapter.texts()
        assert len(gw.model.requests) == 5
        session = await gw.store.get_active_session(str(event(ALICE).session_key))
        assert session is not None
        stored = await gw.store.load_active_messages(session.id)
        assert [m.message.role for m in stored] == ["user", "assistant"] * 4  # nothing compacted

        await gw.say(ALICE, "and now?")
        await gw.idle()
        assert gw.adapter.texts()[-1] == "after the stop"
