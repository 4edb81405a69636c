"""``/status`` shows how full the context is; ``/compact`` summarises on demand
(``docs/turn-loop.md`` §18), through the router on real parts (SQLite, CommonAgent)."""

from __future__ import annotations

import re
from pathlib import Path

from core.agent.profile import AgentProfile
from tests.gateway.fakes import Step
from tests.gateway.harness import ALICE, GatewayFactory


def small_window(tmp_path: Path) -> AgentProfile:
    return AgentProfile(workspace=tmp_path, context_window=32768)


async def test_status_shows_how_full_the_context_is(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(Step("hello back"), profile=small_window(tmp_path)) as gw:
        await gw.say(ALICE, "hello")
        await gw.idle()
        await gw.say(ALICE, "/status")
        status = gw.adapter.texts()[-1]
        assert re.fullmatch(r"💤 Idle · context: \d+% of 32768 tokens \(est\.\)", status)


async def test_compact_summarises_the_older_turns_and_says_so(
    running: GatewayFactory, tmp_path: Path
) -> None:
    steps = [Step(f"answer {n}") for n in range(4)] + [Step("the summary")]
    async with running(*steps, profile=small_window(tmp_path)) as gw:
        for number in range(4):
            await gw.say(ALICE, f"message {number}")
            await gw.idle()
        await gw.say(ALICE, "/compact")
        await gw.idle()
        said = gw.adapter.texts()[-1]
        assert said.startswith("🗜 Compacted: 4 older message(s) summarised")
        assert said.endswith("Context: 1% of 32768 tokens (est.).")
        assert gw.model.requests[-1].messages[0].text().startswith("You compress")


async def test_compact_with_too_little_history_changes_nothing(
    running: GatewayFactory, tmp_path: Path
) -> None:
    async with running(Step("hi"), profile=small_window(tmp_path)) as gw:
        await gw.say(ALICE, "hello")
        await gw.idle()
        await gw.say(ALICE, "/compact")
        await gw.idle()
        assert gw.adapter.texts()[-1] == "Nothing to compact: the conversation is short enough."
        assert len(gw.model.requests) == 1
