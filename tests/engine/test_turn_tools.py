"""Each tool call (seed 000, "Each tool call"): batches, errors, decisions, records."""

from __future__ import annotations

import asyncio
from typing import Any

from core.hooks.results import AskUser, Block, Modify
from core.tools.base import Choice, ToolContext, ToolResult
from core.tools.clarify import clarify_tool
from tests.engine.conftest import USER, Rig, echo_tool, make_tool
from tests.support.model_server import reply_text, reply_tool_call, reply_tool_calls


def tool_results(rig: Rig, index: int) -> list[tuple[str, str]]:
    """``(tool_call_id, content)`` of the tool messages the model got in request ``index``."""
    messages = rig.server.requests[index].messages
    return [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"]


async def test_tools_of_one_response_run_in_parallel(rig: Rig) -> None:
    started = {"a": asyncio.Event(), "b": asyncio.Event()}

    def waiting_for(me: str, other: str) -> Any:
        async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            started[me].set()
            await asyncio.wait_for(started[other].wait(), 5)  # only possible in parallel
            return ToolResult(f"{me} saw {other}")

        return handler

    rig.tools.register(make_tool("a", waiting_for("a", "b")))
    rig.tools.register(make_tool("b", waiting_for("b", "a")))
    rig.server.script(reply_tool_calls([("1", "a", {}), ("2", "b", {})]), reply_text("ok"))

    result = await rig.turn("both")

    assert result.status == "completed"
    assert tool_results(rig, 1) == [("1", "a saw b"), ("2", "b saw a")]


async def test_tools_run_one_at_a_time_when_one_is_interactive(rig: Rig) -> None:
    log: list[str] = []

    def step(name: str) -> Any:
        async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            log.append(f"{name} start")
            for _ in range(5):
                await asyncio.sleep(0)  # yield: a parallel sibling would start now
            log.append(f"{name} end")
            return ToolResult(name)

        return handler

    rig.tools.register(make_tool("plain", step("plain")))
    rig.tools.register(make_tool("ask", step("ask"), interactive=True))
    rig.server.script(reply_tool_calls([("1", "plain", {}), ("2", "ask", {})]), reply_text("ok"))

    await rig.turn("go")

    assert log == ["plain start", "plain end", "ask start", "ask end"]


async def test_results_go_back_in_the_order_the_model_asked(rig: Rig) -> None:
    slow_may_finish = asyncio.Event()

    async def slow(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await asyncio.wait_for(slow_may_finish.wait(), 5)
        return ToolResult("slow")

    async def fast(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        slow_may_finish.set()
        return ToolResult("fast")

    rig.tools.register(make_tool("slow", slow))
    rig.tools.register(make_tool("fast", fast))
    rig.server.script(reply_tool_calls([("1", "slow", {}), ("2", "fast", {})]), reply_text("ok"))

    await rig.turn("go")

    assert tool_results(rig, 1) == [("1", "slow"), ("2", "fast")]
    stored = [m for m in await rig.stored() if m.role == "tool"]
    assert [m.tool_call_id for m in stored] == ["1", "2"]


async def test_unknown_tool_and_invalid_json_become_error_results(rig: Rig) -> None:
    rig.server.script(
        reply_tool_calls([("1", "nope", {}), ("2", "echo", "{not json"), ("3", "echo", "[1]")]),
        reply_text("sorry"),
    )

    result = await rig.turn("go")

    assert result.status == "completed"
    results = dict(tool_results(rig, 1))
    assert results["1"] == "Unknown tool: 'nope' (available: echo)"
    assert results["2"].startswith("Invalid arguments for echo: not valid JSON")
    assert results["3"] == "Invalid arguments for echo: expected a JSON object, got list"
    records = await rig.store.list_tool_calls(result.turn_id)
    assert all(r.is_error for r in records) and len(records) == 3


async def test_a_raising_handler_becomes_an_error_result(rig: Rig) -> None:
    async def broken(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise RuntimeError("disk on fire")

    rig.tools.register(make_tool("broken", broken))
    rig.server.script(reply_tool_call("broken", {}), reply_text("it broke"))

    result = await rig.turn("go")

    assert result.reply == "it broke"
    assert tool_results(rig, 1) == [("call_1", "Tool broken failed: RuntimeError: disk on fire")]
    assert rig.log.of("post_tool_call")[0]["is_error"] is True


async def test_block_gives_the_model_blocked_reason_and_post_tool_call_still_fires(
    rig: Rig,
) -> None:
    ran: list[str] = []

    async def guarded(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ran.append("ran")
        return ToolResult("should not run")

    rig.tools.register(make_tool("guarded", guarded, risk="dangerous"))
    rig.hooks.register(
        "pre_tool_call", lambda risk, **kw: Block("too risky") if risk == "dangerous" else None
    )
    rig.server.script(reply_tool_call("guarded", {}), reply_text("ok"))

    result = await rig.turn("go")

    assert ran == []
    assert tool_results(rig, 1) == [("call_1", "Blocked: too risky")]
    post = rig.log.of("post_tool_call")[0]
    assert (post["blocked"], post["is_error"], post["result"]) == (True, True, "Blocked: too risky")
    record = (await rig.store.list_tool_calls(result.turn_id))[0]
    assert (record.is_error, record.result) == (True, "Blocked: too risky")


async def test_modify_merges_arguments_before_the_tool_runs(rig: Rig) -> None:
    rig.hooks.register("pre_tool_call", lambda **kw: Modify({"text": "changed"}))
    rig.server.script(reply_tool_call("echo", {"text": "orig", "keep": 1}), reply_text("ok"))

    result = await rig.turn("go")

    assert tool_results(rig, 1) == [("call_1", "echo:changed")]
    record = (await rig.store.list_tool_calls(result.turn_id))[0]
    assert record.arguments == '{"text": "changed", "keep": 1}'


async def test_ask_user_approved_runs_the_tool_and_records_the_approval(rig: Rig) -> None:
    rig.hooks.register("pre_tool_call", lambda **kw: AskUser("Run echo?"))
    rig.server.script(reply_tool_call("echo", {"text": "hi"}), reply_text("ok"))
    turn = asyncio.create_task(rig.turn("go"))

    request = await rig.presenter.next_request()
    assert (request.prompt, request.tool, request.arguments) == (
        "Run echo?",
        "echo",
        {"text": "hi"},
    )
    assert await rig.approvals.resolve(request.id, "approved", USER) == "resolved"
    result = await turn

    assert tool_results(rig, 1) == [("call_1", "echo:hi")]
    record = (await rig.store.list_tool_calls(result.turn_id))[0]
    assert (record.approval_outcome, record.is_error) == ("approved", False)
    stored = await rig.store.get_approval(request.id)
    assert stored is not None and stored.state == "approved"


async def test_ask_user_denied_gives_the_model_not_approved_denied(rig: Rig) -> None:
    rig.hooks.register("pre_tool_call", lambda **kw: AskUser("Run echo?"))
    rig.server.script(reply_tool_call("echo", {"text": "hi"}), reply_text("ok"))
    turn = asyncio.create_task(rig.turn("go"))

    request = await rig.presenter.next_request()
    await rig.approvals.resolve(request.id, "denied", USER)
    result = await turn

    assert tool_results(rig, 1) == [("call_1", "Not approved (denied)")]
    record = (await rig.store.list_tool_calls(result.turn_id))[0]
    assert (record.approval_outcome, record.is_error) == ("denied", True)
    assert rig.log.of("post_tool_call")[0]["blocked"] is True


async def test_ask_user_timeout_gives_the_model_not_approved_timed_out(rig: Rig) -> None:
    rig.approval_timeout = 0.05  # this test is about the timeout itself
    rig.hooks.register("pre_tool_call", lambda **kw: AskUser("Run echo?"))
    rig.server.script(reply_tool_call("echo", {"text": "hi"}), reply_text("ok"))

    result = await rig.turn("go")

    assert result.status == "completed"
    assert tool_results(rig, 1) == [("call_1", "Not approved (timed_out)")]


async def test_transform_tool_result_replaces_the_text_the_model_sees(rig: Rig) -> None:
    rig.hooks.register(
        "transform_tool_result", lambda value, **kw: value.replace("x", "[redacted]")
    )
    rig.server.script(reply_tool_call("echo", {"text": "x"}), reply_text("ok"))

    result = await rig.turn("go")

    assert tool_results(rig, 1) == [("call_1", "echo:[redacted]")]
    record = (await rig.store.list_tool_calls(result.turn_id))[0]
    assert record.result == "echo:[redacted]"


async def test_a_raising_pre_tool_call_policy_blocks_the_call(rig: Rig) -> None:
    def broken_policy(**kw: Any) -> None:
        raise ValueError("policy bug")

    rig.hooks.register("pre_tool_call", broken_policy)
    rig.server.script(reply_tool_call("echo", {"text": "x"}), reply_text("ok"))

    await rig.turn("go")

    assert tool_results(rig, 1) == [
        ("call_1", "Blocked: pre_tool_call policy failed (ValueError: policy bug)")
    ]


async def test_tool_call_and_result_messages_are_stored_in_history(rig: Rig) -> None:
    rig.server.script(reply_tool_call("echo", {"text": "x"}, id="c9"), reply_text("done"))

    await rig.turn("go")

    stored = await rig.stored()
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1].tool_calls[0].id == "c9"
    assert (stored[2].tool_call_id, stored[2].content) == ("c9", "echo:x")


async def test_an_interactive_tool_asks_the_user_a_choice_through_the_gate(rig: Rig) -> None:
    async def clarify(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        assert ctx.ask_choice is not None
        picked = await ctx.ask_choice(Choice("Which colour?", ("red", "blue")))
        return ToolResult(f"user picked {picked}")

    rig.tools.register(make_tool("clarify", clarify, interactive=True))
    rig.server.script(reply_tool_call("clarify", {}), reply_text("blue it is"))
    turn = asyncio.create_task(rig.turn("paint it"))

    request = await rig.presenter.next_request()
    assert (request.kind, request.prompt, request.choices) == (
        "choice",
        "Which colour?",
        ("red", "blue"),
    )
    await rig.approvals.resolve(request.id, "approved", USER, choice="blue")
    await turn

    assert tool_results(rig, 1) == [("call_1", "user picked blue")]


async def test_a_profile_toolset_hides_other_tools_from_the_model(rig: Rig) -> None:
    rig.tools.register(echo_tool("secret"))
    rig.agent(tools=("echo",))
    rig.server.script(reply_tool_call("secret", {}), reply_text("ok"))

    await rig.turn("go")

    assert rig.server.requests[0].tool_names == ["echo"]
    assert tool_results(rig, 1) == [("call_1", "Unknown tool: 'secret' (available: echo)")]


async def test_streamed_replies_drive_the_same_loop(rig: Rig) -> None:
    rig.agent(stream=True)
    rig.server.script(reply_tool_call("echo", {"text": "s"}), reply_text("streamed answer"))

    result = await rig.turn("go")

    assert all(r.stream for r in rig.server.requests)
    assert tool_results(rig, 1) == [("call_1", "echo:s")]
    assert result.reply == "streamed answer"


async def test_modify_with_arguments_that_are_not_a_dict_blocks_the_call(rig: Rig) -> None:
    rig.hooks.register("pre_tool_call", lambda **kw: Modify(["text", "x"]))  # type: ignore[arg-type]
    rig.server.script(reply_tool_call("echo", {"text": "hi"}), reply_text("ok"))

    result = await rig.turn("go")

    assert result.status == "completed"
    assert tool_results(rig, 1) == [("call_1", "Blocked: invalid pre_tool_call result (list)")]


async def test_an_unknown_pre_tool_call_result_blocks_the_call(rig: Rig) -> None:
    ran: list[str] = []

    async def guarded(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        ran.append("ran")
        return ToolResult("ran")

    rig.tools.register(make_tool("guarded", guarded))
    rig.hooks.register("pre_tool_call", lambda **kw: "allow")
    rig.server.script(reply_tool_call("guarded", {}), reply_text("ok"))

    await rig.turn("go")

    assert tool_results(rig, 1) == [("call_1", "Blocked: invalid pre_tool_call result (str)")]
    assert ran == []


async def test_clarify_reports_a_denied_question_as_denied(rig: Rig) -> None:
    rig.tools.register(clarify_tool())
    args = {"question": "Which colour?", "choices": ["red", "blue"]}
    rig.server.script(reply_tool_call("clarify", args), reply_text("ok"))
    turn = asyncio.create_task(rig.turn("paint it"))

    request = await rig.presenter.next_request()
    await rig.approvals.resolve(request.id, "denied", USER)
    await asyncio.wait_for(turn, 5)

    assert tool_results(rig, 1) == [("call_1", "No answer (denied)")]
