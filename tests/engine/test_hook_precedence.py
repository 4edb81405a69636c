"""``pre_tool_call`` results combine by precedence, and the policies judge the final call.

Any ``Block`` wins, then ``AskUser``, then ``Modify``; after a ``Modify`` every hook —
the built-in dangerous-command policy included — is asked again about the modified
arguments, so a rewrite into something dangerous cannot slip past the approval. The real
terminal tool runs (on the host shell, in the test's workspace).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from core.hooks.builtin import register_builtin_hooks
from core.hooks.registry import InvalidDecision, Verdict, by_precedence
from core.hooks.results import AskUser, Block, Modify
from core.tools.terminal import terminal_tool
from tests.engine.conftest import USER, Rig
from tests.support.model_server import reply_text, reply_tool_call


def tool_results(rig: Rig, index: int) -> list[str]:
    messages = rig.server.requests[index].messages
    return [m["content"] for m in messages if m["role"] == "tool"]


def with_terminal(rig: Rig) -> None:
    rig.tools.register(terminal_tool())
    register_builtin_hooks(rig.hooks)


async def test_a_modify_that_makes_a_command_dangerous_gets_an_approval(
    rig: Rig, tmp_path: Path
) -> None:
    with_terminal(rig)
    (tmp_path / "scratch").mkdir()
    rig.hooks.register("pre_tool_call", lambda **kw: Modify({"command": "rm -rf ./scratch"}))
    rig.server.script(reply_tool_call("terminal", {"command": "echo hi"}), reply_text("ok"))
    turn = asyncio.create_task(rig.turn("go"))

    request = await rig.presenter.next_request()
    assert request.arguments == {"command": "rm -rf ./scratch"}
    assert "recursive delete" in request.prompt and "rm -rf ./scratch" in request.prompt
    assert (tmp_path / "scratch").exists(), "nothing runs before the approval"
    assert await rig.approvals.resolve(request.id, "denied", USER) == "resolved"
    await turn

    assert tool_results(rig, 1) == ["Not approved (denied)"]
    assert (tmp_path / "scratch").exists()


async def test_policy_hooks_see_the_modified_arguments(rig: Rig) -> None:
    with_terminal(rig)
    seen: list[dict[str, Any]] = []

    def watch(*, arguments: dict[str, Any], **_: Any) -> None:
        seen.append(arguments)

    rig.hooks.register("pre_tool_call", lambda **kw: Modify({"command": "echo changed"}))
    rig.hooks.register("pre_tool_call", watch, priority=200)
    rig.server.script(reply_tool_call("terminal", {"command": "echo hi"}), reply_text("ok"))

    await rig.turn("go")

    assert seen == [{"command": "echo hi"}, {"command": "echo changed"}]
    assert tool_results(rig, 1) == ["changed\n[exit code 0]"]


async def test_a_user_block_wins_over_the_builtin_ask_user(rig: Rig, tmp_path: Path) -> None:
    with_terminal(rig)
    (tmp_path / "scratch").mkdir()
    rig.hooks.register("pre_tool_call", lambda **kw: Block("no deletions here"))
    rig.server.script(
        reply_tool_call("terminal", {"command": "rm -rf ./scratch"}), reply_text("ok")
    )

    await rig.turn("go")

    assert tool_results(rig, 1) == ["Blocked: no deletions here"]
    assert rig.presenter.presented == [], "a blocked call never asks anyone"
    assert (tmp_path / "scratch").exists()


async def test_a_block_after_a_modify_blocks_the_modified_call(rig: Rig) -> None:
    def refuse_curl(*, arguments: dict[str, Any], **_: Any) -> Block | None:
        return Block("no network") if "curl" in arguments["text"] else None

    rig.hooks.register("pre_tool_call", lambda **kw: Modify({"text": "curl x"}))
    rig.hooks.register("pre_tool_call", refuse_curl)
    rig.server.script(reply_tool_call("echo", {"text": "hi"}), reply_text("ok"))

    await rig.turn("go")

    assert tool_results(rig, 1) == ["Blocked: no network"]


async def test_hooks_that_keep_changing_the_arguments_block_the_call(rig: Rig) -> None:
    def grow(*, arguments: dict[str, Any], **_: Any) -> Modify:
        return Modify({"text": arguments["text"] + "!"})

    rig.hooks.register("pre_tool_call", grow)
    rig.server.script(reply_tool_call("echo", {"text": "hi"}), reply_text("ok"))

    await rig.turn("go")

    assert tool_results(rig, 1) == ["Blocked: pre_tool_call hooks kept changing the arguments"]


def test_precedence_block_then_ask_then_modify() -> None:
    ask, block, modify = AskUser("sure?"), Block("no"), Modify({"a": 1})
    assert by_precedence([modify, ask, block]) == Verdict(block=block)
    assert by_precedence([modify, ask]) == Verdict(ask=ask, changes={"a": 1})
    assert by_precedence([Modify({"a": 1, "b": 1}), Modify({"a": 2})]) == Verdict(
        changes={"a": 2, "b": 1}
    )
    assert by_precedence([AskUser("x"), AskUser("y"), AskUser("x")]).ask == AskUser("x\n\ny")
    assert by_precedence([]) == Verdict()


def test_a_result_that_is_no_decision_is_invalid() -> None:
    for bad in ("yes", Modify(["not", "a", "dict"])):  # type: ignore[arg-type]
        try:
            by_precedence([Block("no"), bad])
        except InvalidDecision as error:
            assert error.result == bad
        else:
            raise AssertionError(f"{bad!r} was accepted")
