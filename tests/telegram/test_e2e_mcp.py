"""End to end through Telegram: MCP servers' tools, real servers started by the test.

``mcp-server-time`` and ``mcp-server-git`` (a throw-away repository) over stdio in the
bubblewrap sandbox; :mod:`tests.mcp.server` over stdio and over streamable HTTP (served in
this loop) hangs, crashes, fails, returns an image and changes its tool list. The model is
the scripted model server; every tool result is read back from the request that followed.

The module's servers start once (module-scoped fixtures on the module's event loop,
:mod:`tests.mcp.module_loop`): ``time`` and ``git``, and ``local`` (the test server over
stdio). A test that kills ``local`` waits for it to be back; each test counts from what it
found. The HTTP servers are in-process and cheap: started per test.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from core.agent.tool_images import FOLLOWS
from core.mcp.connection import ServerConnection
from core.mcp.servers import McpServers
from core.store.sqlite import SqliteStore
from core.tools.limits import Limits, MiB
from core.tools.sandbox import Bubblewrap
from gateway.outbound.messages import NEW_SESSION
from tests.mcp.module_loop import gateway, model_server, store, telegram_sim
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
from tests.mcp.server import PNG, Seen
from tests.platform_sim.telegram_sim import ALICE, BOB, TelegramSim
from tests.support.model_server import ScriptedModelServer, reply_text, reply_tool_call
from tests.telegram.harness import GatewayFactory

pytestmark = pytest.mark.asyncio(loop_scope="module")
__all__ = ["gateway", "model_server", "store", "telegram_sim"]  # the module-loop fixtures

APPROVE, DENY, ALWAYS = "✅ Approve", "❌ Deny", "✅ Always (this session)"
KEY = f"telegram:dm:{ALICE.id}"
EXITED = "unavailable: the server exited or closed the connection"
SECRET = "tg-secret-0123456789abcdef"
LIMITS = Limits(processes=64, memory=1024 * MiB, file_size=16 * MiB)
on_module_loop = pytest_asyncio.fixture(loop_scope="module", scope="module")
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


@on_module_loop
async def box() -> Bubblewrap:
    return await sandbox()


@on_module_loop
async def reference(
    box: Bubblewrap, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[McpServers, Path]]:
    """``time`` and ``git`` (on a throw-away repository), started once; the repository."""
    home = tmp_path_factory.mktemp("reference")
    repo = git_repo(home / "repo")
    specs = [
        reference_server("time", "mcp-server-time", ["--local-timezone", "UTC"], home / "t"),
        reference_server("git", "mcp-server-git", ["--repository", str(repo)], repo),
    ]
    async with started(specs, box) as mcp:
        yield mcp, repo


@on_module_loop
async def local(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpServers]:
    """The test server over stdio, started once: with the gateway's secrets in this
    process's environment (none may reach it), a 1 s deadline and a sandbox with
    :data:`LIMITS`."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COMMONOS_TELEGRAM_TOKEN", SECRET)
        patch.setenv("COMMONOS_MODEL_API_KEY", SECRET)
        spec = stdio_test_server(
            "local", tmp_path_factory.mktemp("local"), env={"GREETING": "hello"},
            timeout=1.0, startup_timeout=30.0,
        )  # fmt: skip
        box = await sandbox(LIMITS)
        async with started([spec], box) as mcp:
            yield mcp


async def back(connection: ServerConnection) -> int:
    """Wait until the server is ready (after a kill by an earlier test); its restarts."""
    await connection.wait_for(lambda: connection.state == "ready")
    return connection.restarts


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
    reference: tuple[McpServers, Path],
) -> None:  # fmt: skip
    mcp, repo = reference
    model_server.script(
        reply_tool_call("mcp__time__get_current_time", {"timezone": "UTC"}, id="c1"),
        reply_tool_call("mcp__git__git_log", {"repo_path": str(repo)}, id="c2"),
        reply_text("It is late and the repo has one commit."),
    )
    await gateway(mcp=mcp)
    await telegram_sim.user_says(ALICE.id, "what time is it, and what is in the repo?")
    await reply(telegram_sim, "It is late and the repo has one commit.")
    first, second, third = model_server.requests
    assert {"mcp__time__get_current_time", "mcp__git__git_commit"} <= tool_names(first)
    assert '"timezone": "UTC"' in tool_results(second)[-1]
    assert "first" in tool_results(third)[-1]  # the commit message, from git log


async def test_a_git_write_tool_asks_first_deny_leaves_the_repo_alone_approve_runs_it_once(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
    reference: tuple[McpServers, Path],
) -> None:  # fmt: skip
    mcp, repo = reference
    calls = mcp.connections["git"].calls
    branch = {"repo_path": str(repo), "branch_name": "feature"}
    model_server.script(
        reply_tool_call("mcp__git__git_create_branch", branch, id="c1"),
        reply_text("Left it."),
        reply_tool_call("mcp__git__git_create_branch", branch, id="c2"),
        reply_text("Branched."),
    )
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
    assert mcp.connections["git"].calls == calls + 1


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


async def test_while_a_call_hangs_other_chats_are_answered_and_stop_ends_it_on_the_server(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
) -> None:  # fmt: skip
    seen = Seen()
    model_server.script(reply_tool_call("mcp__slow__hang", {}), reply_text("Hi Bob."))
    async with serving(seen) as url, started([http_server("slow", url, timeout=60)]) as mcp:
        run = await gateway(mcp=mcp)
        await telegram_sim.user_says(ALICE.id, "try the slow tool")
        await seen.hanging.wait()
        await telegram_sim.user_says(BOB.id, "hello")
        await telegram_sim.wait_for_bot_message(BOB.id, lambda m: m.text == "Hi Bob.")
        assert not seen.cancelled.is_set()  # Alice's call still hangs meanwhile
        await telegram_sim.user_says(ALICE.id, "/stop")
        await telegram_sim.wait_for_bot_message(ALICE.id, lambda m: "Stopped" in m.text)
        await run.idle(KEY)
        await seen.cancelled.wait()
    assert len(model_server.requests) == 2  # Alice's turn asked the model nothing more


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
    assert "image_url" not in json.dumps(model_server.requests[2].messages)  # no vision
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


async def test_a_vision_model_sees_a_server_image_after_the_tool_result_the_store_its_note(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:  # fmt: skip
    model_server.script(reply_tool_call("mcp__odd__picture", {}, id="c1"), reply_text("A dot."))
    async with serving(Seen()) as url, started([odd_server(url)]) as mcp:
        run = await gateway(mcp=mcp, vision=True)
        await telegram_sim.user_says(ALICE.id, "show me the picture")
        await reply(telegram_sim, "A dot.")
        await run.idle(KEY)
    *_, call, tool, shown = model_server.requests[1].messages
    assert (call["role"], tool["role"], shown["role"]) == ("assistant", "tool", "user")
    assert tool["content"].startswith("[image image/png") and FOLLOWS in tool["content"]
    image = shown["content"][-1]
    assert image == {"type": "image_url", "image_url": {"url": PNG_URL}}
    session = await store.get_active_session(KEY)
    assert session is not None
    stored = [m.message for m in await store.load_active_messages(session.id)]
    assert "base64" not in json.dumps([m.to_wire() for m in stored])
    assert FOLLOWS not in json.dumps([m.to_wire() for m in stored])


async def test_a_killed_server_gives_one_readable_error_is_restarted_and_the_next_call_works(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
    local: McpServers, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    connection = local.connections["local"]
    restarts = await back(connection)
    model_server.script(reply_tool_call("mcp__local__crash", {}), reply_text("It died."))
    caplog.set_level(logging.INFO, logger="core.mcp.connection")
    run = await gateway(mcp=local)
    await telegram_sim.user_says(ALICE.id, "crash it")
    await reply(telegram_sim, "It died.")
    await run.idle(KEY)
    await connection.wait_for(lambda: connection.restarts > restarts)
    await back(connection)
    model_server.script(reply_tool_call("mcp__local__echo", {"text": "hi"}), reply_text("ok"))
    await telegram_sim.user_says(ALICE.id, "again")
    await reply(telegram_sim, "ok")
    crashed = tool_results(model_server.requests[1])[-1]
    assert crashed == "MCP server local went away during the call; it is being restarted"
    assert tool_results(model_server.requests[3])[-1] == "echo: hi"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    # one for the kill (a restart slower than startup_timeout under load adds its own)
    assert len([w for w in warnings if w.startswith(f"MCP server local is {EXITED}")]) == 1
    assert len([w for w in warnings if "local is back" in w]) == 1


async def test_a_hung_stdio_server_is_restarted_after_its_timed_out_call_and_the_next_works(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
    local: McpServers,
) -> None:  # fmt: skip
    connection = local.connections["local"]
    restarts = await back(connection)
    model_server.script(reply_tool_call("mcp__local__freeze", {}), reply_text("It froze."))
    run = await gateway(mcp=local)
    await telegram_sim.user_says(ALICE.id, "freeze it")
    await reply(telegram_sim, "It froze.")
    await run.idle(KEY)
    assert "timed out after 1 s" in tool_results(model_server.requests[1])[-1]
    await connection.wait_for(lambda: connection.restarts > restarts)
    await back(connection)
    model_server.script(reply_tool_call("mcp__local__echo", {"text": "again"}), reply_text("ok"))
    await telegram_sim.user_says(ALICE.id, "and now?")
    await reply(telegram_sim, "ok")
    assert tool_results(model_server.requests[3])[-1] == "echo: again"


async def test_always_this_session_skips_the_card_in_the_session_and_a_new_session_asks_again(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
    local: McpServers,
) -> None:  # fmt: skip
    await back(local.connections["local"])
    call = reply_tool_call("mcp__local__note", {"text": "milk"})
    model_server.script(call, reply_text("Noted."), call, reply_text("Noted again."))
    run = await gateway(mcp=local)
    await telegram_sim.user_says(ALICE.id, "note milk")
    card = await card_for(telegram_sim, "note")
    assert "server local" in card.text and "milk" in card.text
    query = await telegram_sim.press_button(card, card.button(ALWAYS).data or "", user=ALICE)
    await telegram_sim.wait_for(lambda: query in telegram_sim.answers)
    await reply(telegram_sim, "Noted.")
    await run.idle(KEY)
    await telegram_sim.user_says(ALICE.id, "note milk again")
    await reply(telegram_sim, "Noted again.")  # no card this time
    assert tool_results(model_server.requests[3])[-1] == "noted: milk"
    await run.idle(KEY)
    await telegram_sim.user_says(ALICE.id, "/new")
    await reply(telegram_sim, NEW_SESSION)
    model_server.script(call, reply_text("Asked."))
    await telegram_sim.user_says(ALICE.id, "note milk in the new session")
    second = await card_for(telegram_sim, "note", after=int(card.id))
    assert second.buttons
    cards = [m for m in telegram_sim.bot_messages(ALICE.id) if "MCP tool note" in m.text]
    assert len(cards) == 2  # asked in the first session once, and in the new one


async def card_for(sim: TelegramSim, tool: str, after: int = 0) -> Any:
    return await sim.wait_for_bot_message(
        ALICE.id,
        lambda m: f"MCP tool {tool} " in m.text and bool(m.buttons) and int(m.id) > after,
    )


async def test_a_server_environment_holds_none_of_the_gateway_secrets_and_it_has_the_limits(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
    local: McpServers,
) -> None:  # fmt: skip
    await back(local.connections["local"])
    model_server.script(
        reply_tool_call("mcp__local__environment", {}, id="c1"),
        reply_tool_call("mcp__local__limits", {}, id="c2"),
        reply_text("Looked."),
    )
    await gateway(mcp=local)
    await telegram_sim.user_says(ALICE.id, "what can you see?")
    await reply(telegram_sim, "Looked.")
    inside = json.loads(tool_results(model_server.requests[1])[-1])
    assert inside["GREETING"] == "hello"
    assert SECRET not in json.dumps(inside)
    assert not {"COMMONOS_TELEGRAM_TOKEN", "COMMONOS_MODEL_API_KEY"} & set(inside)
    limits = json.loads(tool_results(model_server.requests[2])[-1])
    assert limits == {"as": LIMITS.memory, "fsize": LIMITS.file_size, "nproc": LIMITS.processes}


async def test_a_session_scoped_server_runs_once_per_session_and_new_stops_it(
    gateway: GatewayFactory, telegram_sim: TelegramSim, model_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    spec = stdio_test_server("own", tmp_path / "own", scope="session", startup_timeout=5.0)
    call = reply_tool_call("mcp__own__pid", {})
    async with started([spec], await sandbox(LIMITS)) as mcp:
        sessions = mcp.sessions["own"]
        assert sessions.probe.state == "stopped" and "pid" in status_tools(mcp)
        run = await gateway(mcp=mcp)
        run.service.router.session_ended.append(mcp.end_session)
        model_server.script(call, reply_text("A1."), call, reply_text("A2."))
        await telegram_sim.user_says(ALICE.id, "which process?")
        await reply(telegram_sim, "A1.")
        await run.idle(KEY)
        await telegram_sim.user_says(ALICE.id, "and again?")
        await reply(telegram_sim, "A2.")
        await run.idle(KEY)
        model_server.script(call, reply_text("B1."))
        await telegram_sim.user_says(BOB.id, "which process?")
        await telegram_sim.wait_for_bot_message(BOB.id, lambda m: m.text == "B1.")
        first, second, bobs = (
            json.loads(tool_results(model_server.requests[i])[-1]) for i in (1, 3, 5)
        )
        assert first["process"] == second["process"] and second["calls"] == 2  # reused
        assert bobs["process"] != first["process"] and bobs["calls"] == 1  # Bob's own
        alices = sessions.live[KEY].connection
        assert set(sessions.live) == {KEY, f"telegram:dm:{BOB.id}"}
        await telegram_sim.user_says(ALICE.id, "/new")
        await reply(telegram_sim, NEW_SESSION)
        assert KEY not in sessions.live and alices.state == "stopped"
        assert f"telegram:dm:{BOB.id}" in sessions.live  # Bob's goes on


def status_tools(mcp: McpServers) -> tuple[str, ...]:
    return mcp.status()[0].tools
