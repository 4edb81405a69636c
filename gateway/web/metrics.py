"""What the gateway counts, for ``/metrics`` (Prometheus text format) and ``/healthz``.

Nothing here reaches into the engine: turns and model calls are observed through the hook
registry (``pre_llm_call`` starts a turn's clock, ``on_session_end`` stops it with its status
and exit reason; ``pre_api_request``/``post_api_request``/``api_request_error`` time model
calls; ``pre_tool_call``/``post_tool_call`` name the tool running now), and messages through
:class:`TrafficCounter`, a step of every bot's outbound pipeline (:mod:`gateway.outbound.pipeline`)
that also sees each inbound event (inbound events, outbound sends and edits, platform
429s). Queue depth and each platform's connection health
(``commonos_adapter_up{platform}`` 1/0, ``commonos_adapter_state{platform,state}`` 1 for
the state it is in, docs/architecture.md §10) are read when scraped. Each gateway has its
own registry (tests run several).

On a PostgreSQL store (several processes, docs/cluster.md) the process's cluster figures
(``commonos_cluster_*``: bots owned, sessions held, lease renewals, losses and takeovers,
events forwarded and received, calls relayed and served, the age of the last renewal) are
read from the :class:`~gateway.cluster.stats.ClusterStats` snapshot given to
:meth:`GatewayMetrics.watch_cluster`, when scraped; on SQLite there are none.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from adapters.base import InboundEvent, RateLimited, SentMessage
from adapters.calls import Call, Edit, Send
from adapters.health import Health, HealthState
from core.hooks.registry import HookRegistry
from gateway.cluster.stats import ClusterStats
from gateway.web.mcp_status import McpCollector, McpStatus

if TYPE_CHECKING:
    from gateway.outbound.directory import ChatDirectory
    from gateway.outbound.pipeline import Perform
    from gateway.service import GatewayService

_log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)
RECENT_TURNS = 50
HEALTH_STATES: tuple[HealthState, ...] = get_args(HealthState)


@dataclass(slots=True)
class LiveTurn:
    """A turn in flight, as the hooks saw it."""

    session_key: str
    turn_id: str
    started: float
    iterations: int = 0
    tool: str | None = None


@dataclass(slots=True)
class FinishedTurn:
    session_key: str
    turn_id: str
    status: str
    exit_reason: str
    seconds: float
    ended: float = field(default_factory=time.time)


class GatewayMetrics:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.registry = CollectorRegistry()
        r = self.registry
        self.turns = Counter("commonos_turns", "Turns ended", ["status", "exit_reason"], registry=r)
        self.inbound = Counter(
            "commonos_inbound_messages", "Inbound events", ["platform"], registry=r
        )
        self.outbound = Counter(
            "commonos_outbound_messages", "Messages sent or edited", ["platform"], registry=r
        )
        self.rate_limited = Counter(
            "commonos_platform_rate_limited", "Platform 429s (each is retried)", ["platform"],
            registry=r,
        )  # fmt: skip
        self.turn_seconds = Histogram(
            "commonos_turn_seconds", "Turn latency", buckets=LATENCY_BUCKETS, registry=r
        )
        self.model_seconds = Histogram(
            "commonos_model_request_seconds", "Model request latency", ["outcome"],
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.queue_depth = Gauge(
            "commonos_queue_depth", "Messages waiting behind running turns", registry=r
        )
        self.adapter_up = Gauge(
            "commonos_adapter_up", "1 when the platform's connection is ok (up or stopped)",
            ["platform"], registry=r,
        )  # fmt: skip
        self.adapter_state = Gauge(
            "commonos_adapter_state", "1 for the state the platform's connection is in",
            ["platform", "state"], registry=r,
        )  # fmt: skip
        self.live: dict[str, LiveTurn] = {}
        self.recent: list[FinishedTurn] = []
        self.traffic = TrafficCounter(self)
        """The counting step of every bot's pipeline (``GatewayService(traffic=...)``)."""
        self._directory: ChatDirectory | None = None
        self._model_started: dict[tuple[str, int], float] = {}
        self.mcp: McpStatus | None = None
        """The MCP servers' status (:meth:`watch_mcp`); None without ``[mcp]``."""

    # wiring ---------------------------------------------------------------------------
    def observe(self, hooks: HookRegistry) -> HookRegistry:
        """Register the observing hooks on ``hooks``; returns it."""
        source = "gateway.web.metrics"
        hooks.register("pre_llm_call", self._turn_started, source=source)
        hooks.register("pre_api_request", self._model_started_at, source=source)
        hooks.register("post_api_request", self._model_ok, source=source)
        hooks.register("api_request_error", self._model_failed, source=source)
        hooks.register("pre_tool_call", self._tool_started, priority=0, source=source)
        hooks.register("post_tool_call", self._tool_ended, source=source)
        hooks.register("on_session_end", self._turn_ended, source=source)
        return hooks

    def bind(self, service: GatewayService) -> None:
        """Read the service's queue depth and its platforms' health when scraped."""
        self._directory = service.directory
        dispatcher = service.dispatcher

        def depth() -> float:
            return float(sum(dispatcher.status(k).queue_length for k in dispatcher.busy_keys))

        self.queue_depth.set_function(depth)

    def watch_cluster(self, stats: Callable[[], ClusterStats | None]) -> None:
        """Expose ``stats()`` (this process's part in the cluster) as ``commonos_cluster_*``
        at every scrape; None: nothing (not started yet, or stopped). Call it once."""
        self.registry.register(ClusterCollector(stats))

    def watch_mcp(self, status: McpStatus) -> None:
        """Show each MCP server (``status()``, read when asked) on ``/metrics`` and
        ``/healthz`` (:mod:`gateway.web.mcp_status`). Call it once."""
        self.mcp = status
        self.registry.register(McpCollector(status))

    def health(self) -> dict[str, Health]:
        """Each platform's connection health now."""
        adapters = [] if self._directory is None else self._directory.adapters
        return {adapter.platform: adapter.health for adapter in adapters}

    def exposition(self) -> bytes:
        for platform, health in self.health().items():
            self.adapter_up.labels(platform).set(1 if health.ok else 0)
            for state in HEALTH_STATES:
                self.adapter_state.labels(platform, state).set(1 if health.state == state else 0)
        return generate_latest(self.registry)

    # hooks ------------------------------------------------------------------------------
    def _turn_started(self, *, session_key: str, turn_id: str, **_: Any) -> None:
        self.live[turn_id] = LiveTurn(session_key, turn_id, self.clock())

    def _model_started_at(self, *, turn_id: str, iteration: int, **_: Any) -> None:
        self._model_started[(turn_id, iteration)] = self.clock()
        turn = self.live.get(turn_id)
        if turn is not None:
            turn.iterations = max(turn.iterations, iteration)

    def _model_done(self, turn_id: str, iteration: int, outcome: str) -> None:
        started = self._model_started.pop((turn_id, iteration), None)
        if started is not None:
            self.model_seconds.labels(outcome).observe(self.clock() - started)

    def _model_ok(self, *, turn_id: str, iteration: int, **_: Any) -> None:
        self._model_done(turn_id, iteration, "ok")

    def _model_failed(self, *, turn_id: str, iteration: int, **_: Any) -> None:
        self._model_done(turn_id, iteration, "error")

    def _tool_started(self, *, turn_id: str, **kwargs: Any) -> None:
        turn = self.live.get(turn_id)
        if turn is not None:
            turn.tool = str(kwargs.get("tool_name") or "?")

    def _tool_ended(self, *, turn_id: str, **_: Any) -> None:
        turn = self.live.get(turn_id)
        if turn is not None:
            turn.tool = None

    def _turn_ended(
        self, *, session_key: str, turn_id: str, status: str, exit_reason: str, **_: Any
    ) -> None:
        self.turns.labels(str(status), str(exit_reason)).inc()
        turn = self.live.pop(turn_id, None)
        seconds = self.clock() - turn.started if turn is not None else 0.0
        if turn is not None:
            self.turn_seconds.observe(seconds)
        for key in [k for k in self._model_started if k[0] == turn_id]:
            del self._model_started[key]
        finished = FinishedTurn(session_key, turn_id, str(status), str(exit_reason), seconds)
        self.recent = [finished, *self.recent[: RECENT_TURNS - 1]]


class TrafficCounter:
    """The counting step of every bot's pipeline (:mod:`gateway.outbound.pipeline`): each inbound
    event, each send and edit that arrived, each platform 429, per platform."""

    def __init__(self, metrics: GatewayMetrics) -> None:
        self._metrics = metrics

    def received(self, event: InboundEvent) -> None:
        self._metrics.inbound.labels(event.platform).inc()

    async def __call__(self, call: Call, next: Perform) -> SentMessage | None:
        platform = call.chat.platform
        try:
            result = await next(call)
        except RateLimited:
            self._metrics.rate_limited.labels(platform).inc()
            raise
        if isinstance(call, Send | Edit):
            self._metrics.outbound.labels(platform).inc()
        return result


CLUSTER_COUNTERS: tuple[tuple[str, str], ...] = (
    ("lease_renewals", "Heartbeats that renewed this process's leases"),
    ("leases_lost", "Leases this process held and lost (expired or taken over)"),
    ("takeovers", "Leases this process took over after their owner stopped renewing"),
    ("events_forwarded", "Inbound events sent to the process running their session"),
    ("events_received", "Inbound events other processes forwarded here"),
    ("calls_relayed", "Platform calls sent by mail to the bot's owner"),
    ("calls_served", "Platform calls performed here for other processes"),
    ("mail_reconnects", "Times the LISTEN connection for cluster mail was made again"),
)
"""The :class:`ClusterStats` counters, each ``commonos_cluster_<name>_total``."""


class ClusterCollector(Collector):
    """``commonos_cluster_*`` read from a :class:`ClusterStats` snapshot at each scrape."""

    def __init__(self, stats: Callable[[], ClusterStats | None]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        stats = self._stats()
        if stats is None:
            return
        yield _gauge("process", "1, labelled with this process's id", 1, id=stats.process_id)
        yield _gauge("live_processes", "Processes of the cluster seen alive", stats.live_processes)
        bots = GaugeMetricFamily(
            "commonos_cluster_bot_owned", "1 for each bot lease this process holds", labels=["bot"]
        )
        for bot in stats.bots_owned:
            bots.add_metric([bot], 1)
        yield bots
        yield _gauge("bots_owned", "Bot leases this process holds", len(stats.bots_owned))
        yield _gauge("sessions_held", "Session leases this process holds", stats.sessions_held)
        yield _gauge(
            "last_renewal_age_seconds",
            "Seconds since this process's leases were last renewed",
            stats.last_renewal_age,
        )
        for name, documentation in CLUSTER_COUNTERS:
            value = getattr(stats, name)
            yield CounterMetricFamily(f"commonos_cluster_{name}", documentation, value=value)


def _gauge(name: str, documentation: str, value: float, **labels: str) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily(f"commonos_cluster_{name}", documentation, labels=list(labels))
    gauge.add_metric(list(labels.values()), value)
    return gauge
