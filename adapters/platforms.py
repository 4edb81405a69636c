"""The platform registry: a chat platform is one adapter package plus one line here.

Each platform package has a light module (no SDK import) whose ``PLATFORM`` value
describes it — :class:`Platform`: its name, its ``config.toml`` section model, and the
factory that builds its adapter (importing the SDK only then). The gateway's config
loader and composition root iterate over :func:`platforms`; no gateway module names a
platform. :func:`register` adds one at run time (plugins, tests).
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.base import Adapter
from adapters.config import PlatformSection
from core.store.base import Store

BUILT_IN = {
    "telegram": "adapters.telegram.platform",
    "discord": "adapters.discord.platform",
    "slack": "adapters.slack.platform",
    "web": "adapters.web.platform",
}
"""Platform name → module holding its ``PLATFORM`` (imported on first use)."""


@dataclass(frozen=True, slots=True)
class AdapterContext:
    """What the gateway hands an adapter factory: the store (for the durable inbox) and the
    chat commands to publish. When an item is handled the event's own receipt says
    (:class:`adapters.base.Receipt`). ``data_dir`` is where an adapter may keep files of
    its own (the web chat's upload spool; None: a temporary folder);
    ``max_attachment_bytes`` is ``[attachments] max_bytes`` (an adapter that takes files in
    itself, the web chat's uploads, refuses larger ones)."""

    store: Store
    commands: tuple[tuple[str, str], ...] = ()
    data_dir: Path | None = None
    max_attachment_bytes: int = 20 * 1024 * 1024


AdapterFactory = Callable[[Any, AdapterContext], Adapter]


@dataclass(frozen=True, slots=True)
class RouteHost:
    """A platform whose adapter serves HTTP lets the gateway serve routes beside it
    (``/healthz``, ``/metrics``, ``/dashboard``; docs/architecture.md §14)."""

    add_routes: Callable[[Callable[[Any], None]], None]
    """Call with an installer of routes (given the server's ``aiohttp`` application),
    before the adapter starts."""
    operator: str
    """Who is at the browser (the platform's user id)."""
    closing: asyncio.Event
    """Set when the server is shutting down: long-lived responses end."""
    address: Callable[[], str | None] | None = None
    """Where the server can be reached once started (None before; shown by ``commonos
    status`` for a cluster's process)."""


RouteHostOf = Callable[[Adapter], RouteHost]
LeaseCredential = Callable[[Adapter], str]
"""The secret that names one bot of the platform (its token): the bot a cluster leases."""


@dataclass(frozen=True, slots=True)
class Platform:
    """One chat platform, as the gateway sees it before any SDK is imported."""

    name: str
    section: type[PlatformSection]
    build: AdapterFactory | None
    """None: the section is understood but no adapter is built yet."""
    on_by_default: bool = False
    """Runs with its default section when the config file has none (the web chat)."""
    route_host: RouteHostOf | None = None
    """The adapter serves HTTP, and other routes may be served beside its own."""
    lease_credential: LeaseCredential | None = None
    """The platform's bot is one account that one process of a cluster talks to at a time
    (docs/cluster.md): the credential naming it, given the built adapter (hashed into the
    lease name, never shown). None: the adapter runs in every process (web, terminal)."""


_registered: dict[str, Platform] = {}


def register(platform: Platform) -> None:
    """Add (or replace) a platform."""
    _registered[platform.name] = platform


def unregister(name: str) -> None:
    _registered.pop(name, None)


def platforms() -> dict[str, Platform]:
    """Every known platform, built-in first, in registration order."""
    for name, module in BUILT_IN.items():
        if name not in _registered:
            _registered[name] = importlib.import_module(module).PLATFORM
    return dict(_registered)
