"""``/dashboard``: every platform's running turns, pending approvals, recent turns and
each platform's health line (state, since, reason: docs/architecture.md §10), live over
Server-Sent Events, with Stop, steer and Approve / Deny.

The page holds one ``EventSource`` on ``/api/dashboard/events``; the server sends the
whole state when it changes (it looks every ``TICK`` seconds — the page never polls).
Actions are POSTs that take the same paths as the chat commands: Stop is the router's
``/stop`` (:meth:`gateway.inbound.dispatch.Router.stop`: the chat gets the same one "Stopped"
notice), steer is ``Dispatcher.steer`` (as ``/steer``), and ``Approvals.resolve`` as the
web user (``web:<name>``), so only ``[approvals] web`` approvers may decide, and the card on
the request's own platform is edited to the outcome exactly as if pressed there. Pairing:
the strangers waiting (never their codes) and an Approve form that is ``/pair approve``
as the web user (docs/pairing.md).

With a PostgreSQL store (several processes, docs/cluster.md) the state also lists every
other process's running turns and pending approvals, read from the store, each with the
``process`` that runs it, and the actions work on them: Stop and steer are mailed to the
process holding the session (answer ``{"ok": true, "remote": <process id>}``), an
approval is decided in the store under the same approver rule and its process woken
(:mod:`gateway.cluster.control`). A session this process holds is acted on here, as with
SQLite. While the store cannot be read the state is this process's own with
``cluster_error`` (:data:`STORE_DOWN`), and an action across processes is a 503.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from adapters.platforms import RouteHost
from adapters.session_keys import parse_session_key
from adapters.web.sse import HEARTBEAT, HEARTBEAT_FRAME, frame, open_stream
from gateway.cluster.control import ClusterControl
from gateway.control.access import qualified
from gateway.inbound.pairing import NOT_OWNER
from gateway.service import GatewayService
from gateway.turns.previews import preview, redact, shorten
from gateway.web.health import health_json
from gateway.web.memory_counts import MemoryCounts
from gateway.web.metrics import GatewayMetrics

logger = logging.getLogger(__name__)
T = TypeVar("T")

STATIC_DIR = Path(__file__).parent / "static"
TICK = 0.25
MAX_STEER = 4000
STORE_DOWN = "the store could not be read: other processes' turns are not shown"
"""With a cluster, the state's ``cluster_error`` while the store is out of reach."""


def dashboard_state(service: GatewayService, metrics: GatewayMetrics) -> dict[str, Any]:
    live = {turn.session_key: turn for turn in metrics.live.values()}
    now_wall, now_mono = time.time(), metrics.clock()
    running = []
    for key in sorted(service.dispatcher.busy_keys):
        status = service.dispatcher.status(key)
        turn = live.get(key)
        running.append(
            {
                "session_key": key,
                "platform": platform_of(key),
                "who": status.sender_name or status.sender_id,
                "running": status.running,
                "queued": status.queue_length,
                "elapsed": round(now_mono - turn.started, 1) if turn else None,
                "iterations": turn.iterations if turn else 0,
                "tool": turn.tool if turn else None,
            }
        )
    approvals = [
        {
            "id": r.id,
            "session_key": r.session_key,
            "platform": platform_of(r.session_key),
            "tool": r.tool,
            "kind": r.kind,
            "details": preview(r.arguments, 300),
            "prompt": shorten(redact(r.prompt), 300),
            "requested_by": r.requested_by,
            "age": round(now_wall - r.created_at),
        }
        for r in service.approvals.pending()
    ]
    recent = [
        {
            "session_key": t.session_key,
            "status": t.status,
            "exit_reason": t.exit_reason,
            "seconds": round(t.seconds, 1),
        }
        for t in metrics.recent[:20]
    ]
    platforms = {platform: health_json(h) for platform, h in metrics.health().items()}
    return {
        "running": running, "approvals": approvals, "recent": recent, "platforms": platforms,
        "pairing": pairing_requests(service, now_wall),
        "inbound": list(service.inbound.names) if service.inbound is not None else [],
    }  # fmt: skip


async def cluster_state(state: dict[str, Any], control: ClusterControl) -> dict[str, Any]:
    """``state`` (this process's) with every other process's running turns and pending
    approvals from the store; each entry says its ``process``."""
    own, now = control.process_id, time.time()
    for entry in state["running"]:
        entry["process"] = own
    local_keys = {entry["session_key"] for entry in state["running"]}
    for turn in await control.running_turns():
        if turn.session_key in local_keys or turn.process_id == own:
            continue
        state["running"].append(
            {
                "session_key": turn.session_key, "platform": platform_of(turn.session_key),
                "who": None, "running": True, "queued": 0,
                "elapsed": round(now - turn.started_at, 1), "iterations": turn.iterations,
                "tool": None, "process": turn.process_id,
            }
        )  # fmt: skip
    for entry in state["approvals"]:
        entry["process"] = own
    local_ids = {entry["id"] for entry in state["approvals"]}
    for record, holder in await control.pending():
        if record.id in local_ids:
            continue
        state["approvals"].append(
            {
                "id": record.id, "session_key": record.session_key,
                "platform": platform_of(record.session_key), "tool": record.tool,
                "kind": "approval", "details": preview(record.arguments, 300),
                "prompt": shorten(redact(record.prompt), 300),
                "requested_by": record.requested_by,
                "age": round(now - record.requested_at), "process": holder,
            }
        )  # fmt: skip
    return state


def control_of(service: GatewayService) -> ClusterControl | None:
    """The cluster's control of this process (None with SQLite: one process)."""
    control = getattr(service.cluster, "control", None)
    return control if isinstance(control, ClusterControl) else None


def pairing_requests(service: GatewayService, now: float) -> list[dict[str, Any]]:
    """Who waits for a pairing approval (never their code: only they have it)."""
    return [
        {
            "platform": code.platform,
            "user_id": code.user_id,
            "name": code.name,
            "expires_in": max(0, round(code.expires_at - now)),
        }
        for code in sorted(service.pairing.waiting.values(), key=lambda c: c.created_at)
        if code.expires_at > now
    ]


def platform_of(session_key: str) -> str:
    """The platform a session key names ("?" for a key that does not parse)."""
    try:
        return parse_session_key(session_key).platform
    except ValueError:
        return "?"


def install_dashboard(
    app: web.Application, service: GatewayService, metrics: GatewayMetrics, host: RouteHost
) -> None:
    Dashboard(service, metrics, host).install(app)


class Dashboard:
    def __init__(self, service: GatewayService, metrics: GatewayMetrics, host: RouteHost) -> None:
        self.service, self.metrics, self.host = service, metrics, host
        self.user = qualified("web", host.operator)
        self._store_down = False
        memory = service.memory
        self.memory = MemoryCounts(memory.memory.memory_counts) if memory is not None else None
        """Entries per scope, never contents (``[memory]`` on only)."""

    @property
    def control(self) -> ClusterControl | None:
        """Read at each use: the cluster node is attached after the routes are."""
        return control_of(self.service)

    async def state(self) -> dict[str, Any]:
        """This process's state, and with a cluster every process's (module docstring)."""
        state = dashboard_state(self.service, self.metrics)
        if self.memory is not None:
            state["memory"] = await self.memory.current()
        for name, read in self.service.dashboard_extras.items():
            state[name] = await read()
        control = self.control
        if control is None:
            return state
        try:
            state = await cluster_state(state, control)
        except Exception as exc:
            if not self._store_down:
                logger.warning("dashboard: %s (%s)", STORE_DOWN, type(exc).__name__)
            self._store_down = True
            return {**state, "cluster_error": STORE_DOWN}
        self._store_down = False
        return state

    async def _across(self, work: Awaitable[T]) -> T:
        """A cluster action's store and mail work; the store out of reach is a 503 with
        one readable error (never the store's URL)."""
        try:
            return await work
        except Exception as exc:
            logger.warning("dashboard: an action across processes failed (%s)", type(exc).__name__)
            raise web.HTTPServiceUnavailable(
                text='{"error": "the store could not be reached; try again"}',
                content_type="application/json",
            ) from None

    def install(self, app: web.Application) -> None:
        app.router.add_get("/dashboard", self.page)
        app.router.add_static("/dashboard-static", STATIC_DIR, append_version=False)
        app.router.add_get("/api/dashboard/events", self.events)
        app.router.add_post("/api/dashboard/stop", self.stop)
        app.router.add_post("/api/dashboard/steer", self.steer)
        app.router.add_post("/api/dashboard/decide", self.decide)
        app.router.add_post("/api/dashboard/pair", self.pair)

    async def page(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(
            STATIC_DIR / "dashboard.html", headers={"Cache-Control": "no-cache"}
        )

    async def events(self, request: web.Request) -> web.StreamResponse:
        response = await open_stream(request)
        sent: str | None = None
        quiet = 0.0
        try:
            while not self.host.closing.is_set():
                state = json.dumps(await self.state(), sort_keys=True)
                if state != sent:
                    await response.write(frame("state", json.loads(state)))
                    sent, quiet = state, 0.0
                elif quiet >= HEARTBEAT:
                    await response.write(HEARTBEAT_FRAME)
                    quiet = 0.0
                await asyncio.sleep(TICK)
                quiet += TICK
        except (ConnectionResetError, ConnectionError):
            pass
        return response

    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            raise web.HTTPBadRequest(text='{"error": "body: expected a JSON object"}') from None
        if not isinstance(body, dict):
            raise web.HTTPBadRequest(text='{"error": "body: expected a JSON object"}')
        return body

    async def stop(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        key = str(body.get("session_key", ""))
        control = self._elsewhere(key)
        remote = await self._across(control.stop(key)) if control is not None else None
        if remote is not None:
            return web.json_response({"ok": True, "remote": remote})
        stopped = await self.service.router.stop(key)
        return web.json_response({"stopped": stopped})

    async def steer(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        key, text = str(body.get("session_key", "")), str(body.get("text", "")).strip()
        if not text or len(text) > MAX_STEER:
            return web.json_response({"error": "text: expected 1-4000 characters"}, status=400)
        control = self._elsewhere(key)
        remote = await self._across(control.steer(key, text)) if control is not None else None
        if remote is not None:
            return web.json_response({"ok": True, "remote": remote})
        return web.json_response({"steered": self.service.dispatcher.steer(key, text)})

    async def decide(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        outcome = body.get("outcome")
        if outcome not in ("approved", "denied"):
            return web.json_response({"error": "outcome: approved or denied"}, status=400)
        approval_id = str(body.get("approval_id", ""))
        approvals, control = self.service.approvals, self.control
        if control is not None and approvals.get(approval_id) is None:
            result = await control.decide(approval_id, outcome, self.user, approvals.approvers_of)
        else:
            result = await approvals.resolve(approval_id, outcome, self.user)
        status = 403 if result == "forbidden" else 200
        return web.json_response({"result": result}, status=status)

    def _elsewhere(self, key: str) -> ClusterControl | None:
        """The cluster's control when ``key`` may run on another process (not busy here)."""
        return None if key in self.service.dispatcher.busy_keys else self.control

    async def pair(self, request: web.Request) -> web.Response:
        """Approve a pairing code as the web user (docs/pairing.md): only an operator
        (``[approvals] web``) or a web owner may; the answer is the chat's ``/pair`` one."""
        body = await self._body(request)
        code = str(body.get("code", "")).strip()
        if not code:
            return web.json_response(
                {"error": "code: expected the user's pairing code"}, status=400
            )
        pairing = self.service.pairing
        if not pairing.owns_any(self.user):
            return web.json_response({"error": NOT_OWNER}, status=403)
        return web.json_response({"message": await pairing.approve(code, self.user)})
