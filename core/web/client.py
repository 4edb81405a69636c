"""The guarded HTTP client of the web tools (:mod:`core.web.guard`).

Every connection goes through :class:`core.web.guard.PinnedBackend`; redirects are not
followed by httpx (the fetcher follows them itself, each hop a new request through the same
guard), and no proxy from the environment is used (a proxy would resolve the name itself).
"""

from __future__ import annotations

import httpcore
import httpx

from core.web.guard import AddressGuard, PinnedBackend

USER_AGENT = "CommonOS-gateway/0.1 (web_fetch; +https://github.com/commonos)"
ROBOTS_AGENT = "CommonOS"
"""The product token matched against robots.txt ``User-agent`` lines."""


class _GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport (its error mapping included) on a pinned, guarded pool."""

    def __init__(self, guard: AddressGuard) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=4,
            keepalive_expiry=5.0,
            network_backend=PinnedBackend(guard),
        )


def guarded_client(guard: AddressGuard, timeout: float) -> httpx.AsyncClient:
    """A client that connects only where ``guard`` allows; ``timeout`` bounds each phase."""
    return httpx.AsyncClient(
        transport=_GuardedTransport(guard),
        timeout=httpx.Timeout(timeout),
        follow_redirects=False,
        trust_env=False,
        headers={"User-Agent": USER_AGENT},
    )
