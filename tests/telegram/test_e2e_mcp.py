"""End to end through Telegram: MCP servers' tools, real servers started by the test.

``mcp-server-time`` and ``mcp-server-git`` (a throw-away repository) over stdio in the
bubblewrap sandbox; :mod:`tests.mcp.server` over stdio and over streamable HTTP (served in
this loop) hangs, crashes, fails, returns an image and changes its tool list. The model is
the scripted model server; every tool result is read back from the request that followed.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.rig import (
    branches,
    git_repo,
    http_server,
    reference_server,
    sandbox,
    serving,
    started,
    stdio_test_server,
)
from tests.mcp.server import Seen
from tests.platform_sim.telegram_sim import ALICE, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call
from tests.telegram.harness import GatewayFactory

APPROVE, DENY = "✅ Approve", "❌ Deny"
KEY = f"telegram:dm:{ALICE.id}"
SECRET = "tg-secret-0123456789abcdef"


def tool_results(request: Any) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


def tool_names(request: Any) -> set[str]:
    return {t["function"]["name"] for t in request.body.get("tools", [])}


async def reply(sim: TelegramSim, text: str) -> None:
    await sim.wait_for_bot_message(ALICE.id, lambda m: m.text == text)


async def press(sim: TelegramSim, label: str) -> None:
    card = await sim.wait_for_bot_message(
        ALICE.id, lambda m: "git_create_branch" in m.text and bool(m.buttons)
    )
    assert "server git" in card.text
    query = await sim.press_button(card, card.button(label).data or "", user=ALICE)
    await sim.wait_for(lambda: query in sim.answers)


async def test_time_and_git_tools_answer_the_model_and_the_reply_arrives(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    repo = git_repo(tmp_path / "repo")
    specs = [
        reference_server("time", "mcp-server-time", ["--local-timezone", "UTC"], tmp_path / "t"),
        reference_server("git", "mcp-server-git", ["--repository", str(repo)], repo),
    ]
    model_server.script(
        reply_tool_call("mcp__time__get_current_time", {"timezone": "UTC"}, id="c1"),
        reply_tool_call("mcp__git__git_log", {"repo_path": str(repo)}, id="c2"),
        reply_text("It is late and the repo has one commit."),
    )
    async with started(specs, await sandbox()) as mcp:
        await gateway(mcp=mcp)
        await telegram_sim.user_says(ALICE.id, "what time is it, and what is in the repo?")
        await reply(telegram_sim, "It is late and the repo has one commit.")
    first, second, third = model_server.requests
    assert {"mcp__time__get_current_time", "mcp__git__git_commit"} <= tool_names(first)
    assert '"timezone": "UTC"' in tool_results(second)[-1]
    assert "first" in tool_results(third)[-1]  # the commit message, from git log


async def test_a_git_write_tool_asks_first_deny_leaves_the_repo_alone_approve_runs_it_once(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    repo = git_repo(tmp_path / "repo")
    spec = reference_server("git", "mcp-server-git", ["--repository", str(repo)], repo)
    branch = {"repo_path": str(repo), "branch_name": "feature"}
    model_server.script(
        reply_tool_call("mcp__git__git_create_branch", branch, id="c1"),
        reply_text("Left it."),
        reply_tool_call("mcp__git__git_create_branch", branch, id="c2"),
        reply_text("Branched."),
    )
    async with started([spec], await sandbox()) as mcp:
        run = await gateway(mcp=mcp)
        await telegram_sim.user_says(ALICE.id, "make a branch")
        await press(telegram_sim, DENY)
        await reply(telegram_sim, "Left it.")
        assert branches(repo) == ["main"]
        await run.idle(KEY)
        await telegram_sim.user_says(ALICE.id, "make a branch, really")
        await press(telegram_sim, APPROVE)
        await reply(telegram_sim, "Branched.")
    assert branches(repo) == ["feature", "main"]
    assert "Not approved (denied)" in tool_results(model_server.requests[1])[-1]
    assert "feature" in tool_results(model_server.requests[3])[-1]
    assert mcp.connections["git"].calls == 1


async def test_a_hung_call_gives_the_model_a_timeout_within_its_deadline_and_the_turn_goes_on(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
) -> None:  # fmt: skip
    seen = Seen()
    model_server.script(reply_tool_call("mcp__slow__hang", {}), reply_text("It hung; moving on."))
    async with serving(seen) as url, started([http_server("slow", url, timeout=1.0)]) as mcp:
        await gateway(mcp=mcp)
        await telegram_sim.user_says(ALICE.id, "try the slow tool")
        await reply(telegram_sim, "It hung; moving on.")
        await seen.cancelled.wait()  # MCP's cancellation reached the server
    asked, answered = model_server.requests
    assert answered.at - asked.at < 1.0 + 1.0
    assert "timed out after 1 s" in tool_results(answered)[-1]


async def test_stop_during_a_hung_call_ends_the_turn_and_cancels_it_on_the_server(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
) -> None:  # fmt: skip
    seen = Seen()
    model_server.script(reply_tool_call("mcp__slow__hang", {}), reply_text("never sent"))
    async with serving(seen) as url, started([http_server("slow", url, timeout=60)]) as mcp:
        run = await gateway(mcp=mcp)
        await telegram_sim.user_says(ALICE.id, "try the slow tool")
        await seen.hanging.wait()
        await telegram_sim.user_says(ALICE.id, "/stop")
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "Stopped" in m.text)
        await run.idle(KEY)
        await seen.cancelled.wait()
    assert len(model_server.requests) == 1


async def test_errors_images_and_a_changed_tool_list_reach_the_model_without_a_restart(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    model_server.script(
        reply_tool_call("mcp__odd__fail", {"why": "disk on fire"}, id="c1"),
        reply_tool_call("mcp__odd__picture", {}, id="c2"),
        reply_tool_call("mcp__odd__grow", {}, id="c3"),
        reply_tool_call("mcp__odd__extra", {}, id="c4"),
        reply_text("Seen it all."),
    )
    async with serving(Seen()) as url, started([odd_server(url)]) as mcp:
        run = await gateway(mcp=mcp)
        await telegram_sim.user_says(ALICE.id, "exercise the odd server")
        await reply(telegram_sim, "Seen it all.")
        await run.idle(KEY)
        model_server.script(reply_text("Still here."))
        await telegram_sim.user_says(ALICE.id, "and now?")
        await reply(telegram_sim, "Still here.")
    failed, pictured, grown, extra = (tool_results(r)[-1] for r in model_server.requests[1:5])
    assert "fail: disk on fire" in failed
    assert "[image image/png" in pictured
    saved = pictured.rsplit(": ", 1)[1].rstrip("]")
    assert (run.workspace / saved).read_bytes().startswith(b"\x89PNG")
    assert "mcp__odd__extra" not in tool_names(model_server.requests[0])
    assert extra == "extra here"  # called in the turn that grew it
    assert "mcp__odd__extra" in tool_names(model_server.requests[5])  # offered from the next
    assert grown == "grown"
    assert mcp.connections["odd"].restarts == 0


def odd_server(url: str) -> Any:
    """The test server; its run-time tool ``extra`` runs without a card (per-tool rule)."""
    return http_server("odd", url, tool_approvals={"extra": "never"})


async def test_a_killed_server_gives_one_readable_error_is_restarted_and_the_next_call_works(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    spec = stdio_test_server("fragile", tmp_path / "fragile")
    model_server.script(reply_tool_call("mcp__fragile__crash", {}), reply_text("It died."))
    caplog.set_level(logging.INFO, logger="core.mcp.connection")
    async with started([spec], await sandbox()) as mcp:
        run = await gateway(mcp=mcp)
        await telegram_sim.user_says(ALICE.id, "crash it")
        await reply(telegram_sim, "It died.")
        await run.idle(KEY)
        connection = mcp.connections["fragile"]
        await connection.wait_for(lambda: connection.state == "ready" and connection.restarts)
        model_server.script(reply_tool_call("mcp__fragile__echo", {"text": "hi"}), reply_text("ok"))
        await telegram_sim.user_says(ALICE.id, "again")
        await reply(telegram_sim, "ok")
    crashed = tool_results(model_server.requests[1])[-1]
    assert crashed == "MCP server fragile went away during the call; it is being restarted"
    assert tool_results(model_server.requests[3])[-1] == "echo: hi"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len([w for w in warnings if "fragile is unavailable" in w]) == 1
    assert len([w for w in warnings if "fragile is back" in w]) == 1


async def test_a_server_environment_holds_none_of_the_gateway_secrets(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("COMMONOS_TELEGRAM_TOKEN", SECRET)
    monkeypatch.setenv("COMMONOS_MODEL_API_KEY", SECRET)
    spec = stdio_test_server("nosy", tmp_path / "nosy", env={"GREETING": "hello"})
    model_server.script(reply_tool_call("mcp__nosy__environment", {}), reply_text("Looked."))
    async with started([spec], await sandbox()) as mcp:
        await gateway(mcp=mcp)
        await telegram_sim.user_says(ALICE.id, "what can you see?")
        await reply(telegram_sim, "Looked.")
    inside = json.loads(tool_results(model_server.requests[1])[-1])
    assert inside["GREETING"] == "hello"
    assert SECRET not in json.dumps(inside)
    assert not {"COMMONOS_TELEGRAM_TOKEN", "COMMONOS_MODEL_API_KEY"} & set(inside)
