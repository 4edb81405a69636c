"""``[web]`` → the web chat adapter, its access policy, and the routes the gateway adds.

The person at the browser is ``settings.user`` (``[web] name``): the web platform's
allowlist always holds them, so the chat answers with no further config; the dashboard
lets them approve on every platform only when they are a ``[approvals] web`` approver.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from adapters.web import WebAdapter, WebSettings
from core.store.base import Store
from gateway.access import AccessPolicy
from gateway.config_schema import Config, WebSection
from gateway.service import GatewayService
from gateway.web.dashboard import install_dashboard
from gateway.web.health import install_health
from gateway.web.metrics import GatewayMetrics

SettleWait = Callable[[str, str], Awaitable[bool]]


def web_settings(section: WebSection) -> WebSettings:
    host, _, port = section.listen.rpartition(":")
    return WebSettings(
        host=host.strip("[]"), port=int(port), token=section.token, user=section.name
    )


def web_adapter(section: WebSection, store: Store, settled: SettleWait) -> WebAdapter:
    return WebAdapter(store, web_settings(section), update_settled=settled)


def web_approvers(config: Config) -> frozenset[str]:
    """``[approvals] web`` ∪ ``[web] approvers``: bare names."""
    own = config.web.approvers if config.web is not None else frozenset()
    return config.approvals.get("web", frozenset()) | own


def web_access(config: Config) -> AccessPolicy:
    """The browser's user may always talk; others only when listed."""
    section = config.web or WebSection()
    allowed = config.access.get("web", frozenset()) | section.allowed_users | {section.name}
    return AccessPolicy(allowed_users=allowed, approvers=web_approvers(config))


def web_adapter_of(service: GatewayService) -> WebAdapter:
    """The service's web adapter (under any wrapper the service put around it)."""
    adapter: object = service.directory.adapter("web")
    while adapter is not None and not isinstance(adapter, WebAdapter):
        adapter = getattr(adapter, "inner", None)
    if adapter is None:
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
