"""Per-session servers (``scope = "session"``, :mod:`core.mcp.sessions`) against the test
server over streamable HTTP: each session its own connection, bound to its session id;
at most ``max_sessions`` at once (one readable error past that); idle ones stopped on an
injected clock; the config keys."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.cancellation import CancellationToken
from core.mcp.sessions import SessionServers, SessionsFull
from core.mcp.tools import McpTools
from core.tools.base import ToolContext
from gateway.config import ConfigError, parse_config
from tests.mcp.rig import QUICK, http_server, serving
from tests.mcp.server import Seen


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.asyncio
async def test_sessions_are_bounded_reused_kept_apart_and_stopped_when_idle() -> None:
    clock = Clock()
    forever = asyncio.Event()

    async def never(_: float) -> None:  # the periodic sweep does not run by itself here
        await forever.wait()

    async with serving(Seen()) as url:
        spec = http_server("own", url, scope="session", session_idle=60.0, max_sessions=2)
        own = SessionServers(spec, backoff=QUICK, sleep=never, clock=clock)
        assert await own.start() == "ready" and own.probe.state == "stopped"
        assert "echo" in {tool.name for tool in own.tools}
        try:
            a = await own.reach("a", "s1")
            assert await own.reach("a", "s1") is a  # the same session: the same server
            clock.now = 30.0
            b = await own.reach("b", "s1")
            assert b is not a
            with pytest.raises(SessionsFull, match="all 2 per-session servers are in use"):
                await own.reach("c", "s1")
            renewed = await own.reach("a", "s2")  # a new session of the key: a new server
            assert renewed is not a and a.state == "stopped"
            clock.now = 95.0  # b idle for 65 s, a's new one for 65 s too
            assert await own.sweep() == 2 and own.live == {}
            assert b.state == "stopped"
            assert (await own.reach("c", "s1")).state == "ready"
        finally:
            await own.stop()
        assert own.live == {} and own.reason.startswith("per session: 0 of 2")


@pytest.mark.asyncio
async def test_a_session_cannot_reach_another_sessions_server(tmp_path: Path) -> None:
    async with serving(Seen()) as url:
        own = SessionServers(http_server("own", url, scope="session"), backoff=QUICK)
        await own.start()
        try:
            tool = McpTools([own]).tool("mcp__own__echo")
            assert tool is not None
            for key in ("telegram:dm:1", "telegram:dm:2"):
                ctx = context(key, tmp_path)
                assert (await tool.handler({"text": key}, ctx)).text == f"echo: {key}"
            one, two = (own.live[k].connection for k in ("telegram:dm:1", "telegram:dm:2"))
            assert one is not two and one.calls == two.calls == 1
        finally:
            await own.stop()


def context(key: str, workspace: Path) -> ToolContext:
    return ToolContext(key, "s1", "t1", "c1", CancellationToken(), workspace)


def test_the_scope_keys_are_read_and_checked(tmp_path: Path) -> None:
    def server(**keys: object) -> dict[str, object]:
        table = {"url": "http://127.0.0.1:9/mcp", **keys}
        return {"mcp": {"servers": {"s": table}}}

    home = {"COMMONOS_HOME": str(tmp_path)}
    chosen = server(scope="session", session_idle_seconds=30, max_sessions=3)
    (spec,) = parse_config(chosen, None, home).mcp.specs(tmp_path)
    assert (spec.scope, spec.session_idle, spec.max_sessions) == ("session", 30.0, 3)
    (default,) = parse_config(server(), None, home).mcp.specs(tmp_path)
    assert (default.scope, default.session_idle, default.max_sessions) == ("process", 600.0, 8)
    with pytest.raises(ConfigError, match=r"mcp\.servers\.s\.scope"):
        parse_config(server(scope="chat"), None, home)
