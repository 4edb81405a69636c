"""The routes the gateway adds to the web chat's server, and who operates the dashboard.

The web chat itself is a platform (``adapters/web``, built like any other). The person at
the browser is ``[web] name``: the web platform's allowlist always holds them, so the chat
answers with no further config; the dashboard lets them approve on every platform only
when they are a ``[approvals] web`` approver.
"""

from __future__ import annotations

from adapters.web.adapter import WebAdapter
from gateway.access import qualified
from gateway.config import Config
from gateway.service import GatewayService
from gateway.web.dashboard import install_dashboard
from gateway.web.health import install_health
from gateway.web.metrics import GatewayMetrics


def web_operators(config: Config) -> frozenset[str]:
    """Who may decide on every platform from the dashboard: the web chat's approvers
    (``[approvals] web`` ∪ ``[web] approvers``), platform-qualified."""
    if config.platform("web") is None:
        return frozenset()
    return frozenset(qualified("web", name) for name in config.approvers("web"))


def web_adapter_of(service: GatewayService) -> WebAdapter:
    """The service's web adapter: the web chat's server is where the routes go."""
    adapter = service.directory.adapter("web")
    if not isinstance(adapter, WebAdapter):
        raise LookupError("the service has no web adapter")
    return adapter


def mount_web(service: GatewayService, metrics: GatewayMetrics) -> None:
    """Serve ``/healthz``, ``/metrics`` and ``/dashboard`` on the web adapter's server
    (nothing when the web chat is off)."""
    try:
        adapter = web_adapter_of(service)
    except LookupError:
        return
    metrics.bind(service)
    adapter.add_routes(lambda app: install_health(app, service, metrics))
    adapter.add_routes(lambda app: install_dashboard(app, service, metrics, adapter))
