"""What is off costs a turn no call (issue 29 point 4; ``docs/turn-loop.md`` §7, §19):
a hook point nobody registered for, the files of a message that came with none, spans
with no tracer installed. Traced with ``sys.setprofile`` over one real turn."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from types import FrameType

from core import tracing
from core.agent.control import TurnControl
from core.agent.loop import CommonAgent
from core.agent.turn import UserMessage
from core.hooks.registry import HookRegistry
from core.model.retry import RetryPolicy
from tests.engine.conftest import KEY, Rig
from tests.support.model_server import reply_text

ROOT = str(Path(__file__).resolve().parents[2]) + "/"


async def traced_turn(rig: Rig, hooks: HookRegistry) -> list[str]:
    """``file:function`` of every function of ours one plain text turn enters."""
    agent = CommonAgent(
        rig.store, rig.client, rig.tools, hooks, rig.approvals, rig.profile,
        clock=rig.clock, retry=RetryPolicy(max_attempts=1),
    )  # fmt: skip
    entered: list[str] = []

    def profile(frame: FrameType, event: str, _: object) -> None:
        path = frame.f_code.co_filename
        if event == "call" and path.startswith(ROOT):
            entered.append(f"{path.removeprefix(ROOT)}:{frame.f_code.co_name}")

    rig.server.script(reply_text("Hello."))
    sys.setprofile(profile)
    try:
        result = await agent.run_turn(KEY, UserMessage("hi", sender_id="alice"), TurnControl())
    finally:
        sys.setprofile(None)
    assert (result.status, result.reply) == ("completed", "Hello.")
    return entered


def within(entered: list[str], *modules: str) -> list[str]:
    return [e for e in entered if e.startswith(modules)]


async def test_a_turn_with_no_hooks_enters_no_hook_dispatch(rig: Rig) -> None:
    entered = await traced_turn(rig, HookRegistry())

    assert within(entered, "core/hooks/") == []
    assert "core/agent/session_hooks.py:after_turn" not in entered
    assert "core/agent/session_hooks.py:session_start" not in entered


async def test_sync_hooks_alone_are_called_without_a_token_guard(rig: Rig) -> None:
    hooks = HookRegistry()
    seen: list[str] = []
    hooks.register("on_session_end", lambda **kw: seen.append(kw["status"]))

    entered = await traced_turn(rig, hooks)

    assert seen == ["completed"]
    assert "core/cancellation.py:time_boxed" not in entered
    assert "core/hooks/registry.py:under_token" not in entered


async def test_an_async_hook_still_runs_under_the_token(rig: Rig) -> None:
    hooks = HookRegistry()
    seen: list[str] = []

    async def ended(**kw: object) -> None:
        seen.append(str(kw["status"]))

    hooks.register("on_session_end", ended)

    entered = await traced_turn(rig, hooks)

    assert seen == ["completed"]
    assert "core/hooks/registry.py:under_token" in entered
    assert hooks.awaiting == {"on_session_end"} and hooks.live == {"on_session_end"}


async def test_a_message_without_files_never_enters_attachment_content(rig: Rig) -> None:
    entered = await traced_turn(rig, HookRegistry())

    assert within(entered, "core/agent/attachment_content.py") == []


async def test_with_no_tracer_a_turn_enters_no_tracing_code(rig: Rig) -> None:
    assert tracing.tracer is None
    entered = await traced_turn(rig, HookRegistry())

    assert within(entered, "core/tracing.py") == []


async def test_a_turn_with_no_hooks_never_enters_the_session_hook_stage(rig: Rig) -> None:
    entered = await traced_turn(rig, HookRegistry())

    assert within(entered, "core/agent/session_hooks.py", "core/agent/scope.py") == []


async def test_a_turn_that_calls_no_tool_never_builds_a_tool_runner(rig: Rig) -> None:
    entered = await traced_turn(rig, HookRegistry())

    assert within(entered, "core/agent/tool_runner.py") == []


async def test_a_turn_names_its_workspace_without_asking_the_profile(rig: Rig) -> None:
    entered = await traced_turn(rig, HookRegistry())

    assert within(entered, "core/agent/profile.py") == []
    assert entered.count("core/tools/sandbox.py:path_for") == 1


async def test_with_no_request_fields_configured_the_body_is_not_walked_for_them(
    rig: Rig,
) -> None:
    entered = await traced_turn(rig, HookRegistry())

    assert within(entered, "core/model/request_fields.py") == []


async def test_a_new_sessions_first_turn_has_no_history_to_repair_heal_or_look_up(
    rig: Rig,
) -> None:
    entered = await traced_turn(rig, HookRegistry())

    assert "core/agent/repair.py:repaired" not in entered
    assert "core/agent/transcript.py:heal" not in entered
    assert "core/agent/transcript.py:load_call_records" not in entered


async def test_the_tool_list_is_made_once_not_looked_up_tool_by_tool(rig: Rig) -> None:
    entered = await traced_turn(rig, HookRegistry())

    assert "core/tools/base.py:get" not in entered


async def test_an_agent_without_a_model_chooser_never_asks_for_the_sessions_model(
    rig: Rig,
) -> None:
    entered = await traced_turn(rig, HookRegistry())

    assert "core/agent/loop.py:_choice" not in entered
    assert within(entered, "core/agent/model_choice.py") == []


async def test_a_turn_with_no_redirect_starts_no_recording_task(rig: Rig) -> None:
    entered = await traced_turn(rig, HookRegistry())

    assert "core/agent/steer.py:_record" not in entered
    assert "core/agent/steer.py:record_redirects" not in entered


def test_the_registry_knows_which_names_have_hooks_and_which_may_await() -> None:
    class Observer:
        def seen(self, **_: object) -> None: ...

        async def __call__(self, **_: object) -> None: ...

    async def later(**_: object) -> None: ...

    hooks = HookRegistry()
    hooks.register("post_llm_call", Observer().seen)  # a bound sync method
    hooks.register("pre_llm_call", lambda **_: None)
    hooks.register("pre_llm_call", functools.partial(later))  # async, wrapped
    hooks.register("on_session_end", Observer())  # an object whose call is async

    assert hooks.live == {"post_llm_call", "pre_llm_call", "on_session_end"}
    assert hooks.awaiting == {"pre_llm_call", "on_session_end"}
