"""``/healthz`` and ``/metrics`` on the web server.

``/healthz`` answers 200 only when the store answers a query and every adapter has started
and is connected; the JSON body names what is not (503 otherwise). ``/metrics`` is the
Prometheus text exposition of :class:`~gateway.web.metrics.GatewayMetrics`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from gateway.service import GatewayService
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


async def health(service: GatewayService, metrics: GatewayMetrics) -> dict[str, Any]:
    adapters = {a.platform: a.state for a in metrics.adapters}
    down = [a.platform for a in metrics.adapters if not a.connected]
    store_ok = await store_answers(service)
    return {
        "ok": store_ok and not down,
        "store": "ok" if store_ok else "not answering",
        "adapters": {p: ("connected" if p not in down else state) for p, state in adapters.items()},
        "not_ok": ([] if store_ok else ["store"]) + [f"adapter {p}" for p in down],
    }


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
