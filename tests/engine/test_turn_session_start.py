"""``on_session_start`` fires once per new session, in its first turn that reached the
store, even when that turn was stopped or failed before the session hooks
(docs/turn-loop.md §2 step 4, §7): every ``on_session_end`` comes after a start."""

from __future__ import annotations

from core.agent.control import TurnControl
from core.agent.loop import CommonAgent
from core.agent.turn import UserMessage
from core.model.retry import RetryPolicy
from tests.engine.conftest import KEY, USER, Rig
from tests.engine.test_turn_hook_timebox import RecordThenFailStore
from tests.support.model_server import reply_text

SESSION_HOOKS = ("on_session_start", "agent_loop_stopped", "on_session_end")


def session_hooks(rig: Rig) -> list[str]:
    return [name for name in rig.log.names() if name in SESSION_HOOKS]


async def test_a_first_turn_stopped_before_the_hooks_still_starts_the_session(rig: Rig) -> None:
    rig.server.script(reply_text("hello"))
    stopped = TurnControl()
    stopped.stop()

    first = await rig.turn("hi", control=stopped)
    second = await rig.turn("hi again")

    assert (first.status, first.exit_reason) == ("interrupted", "cancelled")
    assert second.reply == "hello"
    assert session_hooks(rig) == [
        "on_session_start",
        "agent_loop_stopped",
        "on_session_end",
        "on_session_end",
    ]
    [start] = rig.log.of("on_session_start")
    assert (start["session_id"], start["turn_id"]) == (first.session_id, first.turn_id)


async def test_a_first_turn_that_failed_while_opening_still_starts_the_session(
    rig: Rig,
) -> None:
    agent = CommonAgent(
        RecordThenFailStore(rig.store),
        rig.client,
        rig.tools,
        rig.hooks,
        rig.approvals,
        rig.profile,
        clock=rig.clock,
        retry=RetryPolicy(max_attempts=1),
    )

    result = await agent.run_turn(KEY, UserMessage("hi", sender_id=USER), TurnControl())

    assert (result.status, result.exit_reason) == ("failed", "crashed")
    assert session_hooks(rig) == ["on_session_start", "on_session_end"]
    assert rig.log.of("on_session_start")[0]["turn_id"] == result.turn_id


async def test_on_session_start_fires_once_when_the_first_turn_runs_through(rig: Rig) -> None:
    rig.server.script(reply_text("one"))

    await rig.turn("first")

    assert session_hooks(rig) == ["on_session_start", "on_session_end"]
