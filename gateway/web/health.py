"""``/healthz`` and ``/metrics`` on the web server.

``/healthz`` answers 200 only when the store answers a query and every enabled platform's
connection is ok (``up``; docs/architecture.md §10, "Connections and health"); else 503,
and ``not_ok`` names what is not (``"store"``, ``"telegram"``, ...). The body lists each
platform's state, since when (ISO 8601, UTC) and why::

    {"ok": false, "store": "ok", "not_ok": ["telegram"],
     "platforms": {"telegram": {"state": "down", "since": "2025-01-01T12:00:00+00:00",
                                "reason": "Telegram rejected the bot token ..."},
                   "web": {"state": "up", "since": "...", "reason": ""}}}

With ``[mcp]`` servers the body also has ``"mcp"``: each server's state, reason, tools
count, restarts, calls and failures (:mod:`gateway.web.mcp_status`); a server that is down
does not make the gateway unhealthy.

``/metrics`` is the Prometheus text exposition of :class:`~gateway.web.metrics.GatewayMetrics`.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from adapters.health import Health
from gateway.service import GatewayService
from gateway.web.mcp_status import mcp_health
from gateway.web.metrics import GatewayMetrics

_log = logging.getLogger(__name__)

STORE_PROBE_SECONDS = 2.0
PROBE_KEY = "healthz:probe"


async def store_answers(service: GatewayService) -> bool:
    try:
        await asyncio.wait_for(service.store.get_active_session(PROBE_KEY), STORE_PROBE_SECONDS)
    except Exception as exc:
        _log.warning("healthz: the store does not answer: %s", exc)
        return False
    return True


def health_json(health: Health) -> dict[str, str]:
    """One platform's health as ``/healthz`` and the dashboard show it."""
    since = datetime.fromtimestamp(health.since, UTC).isoformat(timespec="seconds")
    return {"state": health.state, "since": since, "reason": health.reason}


async def health(service: GatewayService, metrics: GatewayMetrics) -> dict[str, Any]:
    platforms = metrics.health()
    failing = [platform for platform, state in platforms.items() if not state.ok]
    store_ok = await store_answers(service)
    body: dict[str, Any] = {
        "ok": store_ok and not failing,
        "store": "ok" if store_ok else "not answering",
        "platforms": {platform: health_json(state) for platform, state in platforms.items()},
        "not_ok": ([] if store_ok else ["store"]) + failing,
    }
    if metrics.mcp is not None:
        body["mcp"] = mcp_health(metrics.mcp)
    return body


def install_health(app: web.Application, service: GatewayService, metrics: GatewayMetrics) -> None:
    async def healthz(request: web.Request) -> web.Response:
        body = await health(service, metrics)
        return web.json_response(body, status=200 if body["ok"] else 503)

    async def metrics_text(request: web.Request) -> web.Response:
        response = web.Response(body=metrics.exposition())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_text)
