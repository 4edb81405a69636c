"""Each MCP server on ``/healthz`` and ``/metrics``: its state, tools and restarts, by its
name, never its secrets (the real wiring, the web server, a real SDK server over HTTP)."""

from __future__ import annotations

import socket
from pathlib import Path

import aiohttp

from core.mcp.spec import HttpServer, ServerSpec
from core.model.demo import DemoModel
from core.store.sqlite import SqliteStore
from gateway.web.compose import web_adapter_of
from gateway.wiring import build_service
from tests.mcp.rig import http_server, serving, started
from tests.mcp.server import Seen
from tests.web.harness import Running, close, web_config
from tests.web.test_health_metrics import scrape

SECRET = "Bearer mcp-header-secret-0123456789"


def closed_port_url() -> str:
    """A URL nobody answers (a port bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"


async def test_healthz_and_metrics_show_each_server_by_name_without_its_secrets(
    tmp_path: Path, store: SqliteStore
) -> None:
    dead = http_server("dead", closed_port_url(), startup_timeout=2.0)
    async with serving(Seen()) as url:
        live = ServerSpec("notes", HttpServer(url, {"Authorization": SECRET}))
        async with started([live, dead]) as mcp:
            gone = mcp.connections["dead"]
            await gone.wait_for(lambda: gone.restarts >= 1 and gone.state == "unavailable")
            service = build_service(web_config(tmp_path), store, DemoModel(), mcp=mcp)
            await service.start()
            http = aiohttp.ClientSession(trust_env=False)
            running = Running(service, web_adapter_of(service), http)
            try:
                async with running.http.get(running.url + "/healthz") as response:
                    assert response.status == 200  # a server down is not the gateway down
                    health = await response.json()
                    text = await response.text()
                samples = await scrape(running)
                async with running.http.get(running.url + "/metrics") as response:
                    exposition = await response.text()
            finally:
                await close(running)
    notes, down = health["mcp"]["notes"], health["mcp"]["dead"]
    assert notes["state"] == "ready" and notes["tools"] == 12 and notes["restarts"] == 0
    assert down["state"] == "unavailable" and down["tools"] == 0 and down["restarts"] >= 1
    assert samples[("commonos_mcp_server_up", (("server", "notes"),))] == 1.0
    assert samples[("commonos_mcp_server_up", (("server", "dead"),))] == 0.0
    assert samples[("commonos_mcp_server_tools", (("server", "notes"),))] == 12.0
    ready = ("commonos_mcp_server_state", (("server", "notes"), ("state", "ready")))
    assert samples[ready] == 1.0
    assert samples[("commonos_mcp_server_restarts_total", (("server", "dead"),))] >= 1.0
    for shown in (text, exposition):
        assert "mcp-header-secret" not in shown and url not in shown
