"""Each MCP server on ``/healthz`` and ``/metrics``, read from
:meth:`core.mcp.servers.McpServers.status` when asked.

``/healthz`` gains ``"mcp": {"<server>": {"state", "reason", "tools", "restarts", "calls",
"failures"}}``; a server that is down does not make the gateway unhealthy (its tools answer
"unavailable"; the gateway goes on). ``/metrics`` gains, labelled by the server's name only
(never its URL, headers or command line)::

    commonos_mcp_server_up{server}             1 when ready
    commonos_mcp_server_state{server,state}    1 for the state it is in
    commonos_mcp_server_tools{server}          tools listed now
    commonos_mcp_server_restarts_total{server} starts after the first
    commonos_mcp_tool_calls_total{server}      calls made
    commonos_mcp_tool_failures_total{server}   calls that did not return a result

A reason is redacted (:func:`core.redaction.redact_shapes` after the configured values), as
a server's error line may name what it was sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from core.redaction import redact, redact_shapes

STATES = ("starting", "ready", "unavailable", "stopped")


class ServerFigures(Protocol):
    """What is shown of one server (:class:`core.mcp.servers.ServerStatus`)."""

    @property
    def name(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def tools(self) -> tuple[str, ...]: ...
    @property
    def restarts(self) -> int: ...
    @property
    def calls(self) -> int: ...
    @property
    def failures(self) -> int: ...


McpStatus = Callable[[], Sequence[ServerFigures]]


def mcp_health(status: McpStatus) -> dict[str, dict[str, Any]]:
    """Each server as ``/healthz`` shows it."""
    return {
        server.name: {
            "state": server.state,
            "reason": redact_shapes(redact(server.reason)),
            "tools": len(server.tools),
            "restarts": server.restarts,
            "calls": server.calls,
            "failures": server.failures,
        }
        for server in status()
    }


class McpCollector(Collector):
    """``commonos_mcp_*`` read from ``status()`` at each scrape."""

    def __init__(self, status: McpStatus) -> None:
        self._status = status

    def collect(self) -> Iterator[Metric]:
        servers = list(self._status())
        up = GaugeMetricFamily(
            "commonos_mcp_server_up", "1 when the MCP server is ready", labels=["server"]
        )
        state = GaugeMetricFamily(
            "commonos_mcp_server_state", "1 for the state the MCP server is in",
            labels=["server", "state"],
        )  # fmt: skip
        tools = GaugeMetricFamily(
            "commonos_mcp_server_tools", "Tools the MCP server lists now", labels=["server"]
        )
        restarts = _counter("commonos_mcp_server_restarts", "Starts after the first")
        calls = _counter("commonos_mcp_tool_calls", "MCP tool calls made")
        failures = _counter("commonos_mcp_tool_failures", "MCP tool calls without a result")
        for server in servers:
            up.add_metric([server.name], 1 if server.state == "ready" else 0)
            for name in STATES:
                state.add_metric([server.name, name], 1 if server.state == name else 0)
            tools.add_metric([server.name], len(server.tools))
            restarts.add_metric([server.name], server.restarts)
            calls.add_metric([server.name], server.calls)
            failures.add_metric([server.name], server.failures)
        yield from (up, state, tools, restarts, calls, failures)


def _counter(name: str, documentation: str) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, labels=["server"])
