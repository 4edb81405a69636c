"""The external runtime's after-reply hooks and step callback run under the turn's token
(docs/turn-loop.md §7, §14): /stop while one hangs ends the turn at once, ``interrupted``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from core.agent.control import TurnControl
from tests.engine.conftest import Rig
from tests.engine.test_turn_external import RUNTIME, use_runtime
from tests.engine.test_turn_hook_timebox import HangOnce

STOP_WITHIN = 1.0
"""Well under the registry's 10 s time box, which a hook outside the token would hold."""


@pytest.mark.parametrize("hook", ["transform_llm_output", "post_llm_call", "step_callback"])
async def test_stop_while_an_external_runtime_hook_hangs_ends_the_turn_interrupted(
    rig: Rig, tmp_path: Path, hook: str
) -> None:
    use_runtime(rig, tmp_path, RUNTIME)
    hang = HangOnce()
    options: dict[str, Any] = {}
    if hook == "step_callback":
        options["step_callback"] = hang
    else:
        rig.hooks.register(hook, hang)
    control = TurnControl()
    turn = asyncio.create_task(rig.turn("find a", control=control, **options))
    await asyncio.wait_for(hang.entered.wait(), 10)

    began = time.monotonic()
    control.stop()
    result = await asyncio.wait_for(turn, 5)

    assert time.monotonic() - began < STOP_WITHIN
    assert (result.status, result.exit_reason) == ("interrupted", "cancelled")
    stored = await rig.store.get_turn(result.turn_id)
    assert stored is not None and (stored.status, stored.exit_reason) == (
        "interrupted",
        "cancelled",
    )
    assert [c["reason"] for c in rig.log.of("agent_loop_stopped")] == ["cancelled"]
    assert rig.log.of("on_session_end")[0]["status"] == "interrupted"
    after = await asyncio.wait_for(rig.turn("again"), 10)
    assert (after.status, after.reply) == ("completed", "got 'again' after system")


async def test_the_external_reply_is_stored_then_transformed_as_in_the_engine_loop(
    rig: Rig, tmp_path: Path
) -> None:
    use_runtime(rig, tmp_path, RUNTIME)
    rig.hooks.register("transform_llm_output", lambda value, **_: value.upper())

    result = await rig.turn("find a")

    assert result.reply == "GOT 'FIND A' AFTER SYSTEM"
    assert [(m.role, m.content) for m in await rig.stored()] == [
        ("user", "find a"),
        ("assistant", result.reply),
    ]
    assert rig.log.of("post_llm_call")[0]["reply"] == result.reply
