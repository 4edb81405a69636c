"""The routes the gateway adds to the web chat's server, and who operates the dashboard.

The web chat itself is a platform (``adapters/web``, built like any other). The person at
the browser is ``[web] name``: the web platform's allowlist always holds them, so the chat
answers with no further config; the dashboard lets them approve on every platform only
when they are a ``[approvals] web`` approver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.platforms import RouteHost, platforms
from gateway.config import Config
from gateway.control.access import qualified
from gateway.service import GatewayService

if TYPE_CHECKING:
    from adapters.web.adapter import WebAdapter
    from gateway.web.metrics import GatewayMetrics


def web_operators(config: Config) -> frozenset[str]:
    """Who may decide on every platform from the dashboard: the web chat's approvers
    (``[approvals] web`` ∪ ``[web] approvers``), platform-qualified."""
    if config.platform("web") is None:
        return frozenset()
    return frozenset(qualified("web", name) for name in config.approvers("web"))


def web_adapter_of(service: GatewayService) -> WebAdapter:
    """The service's web chat adapter (for tests and benchmarks that drive the web chat)."""
    from adapters.web.adapter import WebAdapter

    adapter = service.directory.adapter("web")
    if not isinstance(adapter, WebAdapter):
        raise LookupError("the service has no web adapter")
    return adapter


def route_host_of(service: GatewayService) -> RouteHost | None:
    """The first running platform whose registration says its adapter serves HTTP
    (``Platform.route_host``: the web chat), or None."""
    for name, platform in platforms().items():
        adapter = service.directory.adapter(name)
        if platform.route_host is not None and adapter is not None:
            return platform.route_host(adapter)
    return None


def mount_web(service: GatewayService, metrics: GatewayMetrics) -> None:
    """Serve ``/healthz``, ``/metrics`` and ``/dashboard`` beside the platform that serves
    HTTP (nothing when none runs: the web chat is off)."""
    host = route_host_of(service)
    if host is None:
        return
    from gateway.web.dashboard import install_dashboard
    from gateway.web.health import install_health

    metrics.bind(service)
    host.add_routes(lambda app: install_health(app, service, metrics))
    host.add_routes(lambda app: install_dashboard(app, service, metrics, host))
