"""The running gateway: the composition root that ``commonos run`` starts.

:class:`Gateway` owns the long-lived parts and their order::

    start():  data dir → store (opened, migrated) → model client → default profile
              (SOUL.md read) → workspaces, terminal sandboxes probed
              (:mod:`gateway.turns.containment`) → service + adapters → ready
    stop():   in reverse; each part is closed even when another fails to close

Between the model client and ``ready`` the :class:`~gateway.service.GatewayService`
(the runtime: engine, dispatcher, approvals, chat layer and the configured adapters) is
built by :mod:`gateway.wiring` and started — its start marks the turns a previous run
left running as failed; ``stop`` stops it first. With a PostgreSQL store the service also
gets this process's :class:`~gateway.cluster.node.ClusterNode` (docs/cluster.md): started
once the adapters are (it takes the bots no other process owns), stopped last of the
service (it gives them up and leaves, so another process takes over at once).

An adapter that is ``down`` once started (the web chat's address in use, a token the
platform rejects; docs/architecture.md §10) is not a way in: when every enabled platform is
down nothing could reach the agent, so start fails with one line naming each and why;
otherwise one WARNING names what runs and what does not.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING

from adapters.base import Adapter
from core.model.base import ModelClient
from core.store.base import Store, StoreError, StoreUnavailable
from core.store.files import StoreFileInUse, StoreFileLock
from gateway import telemetry
from gateway.config import Config, ModelSection
from gateway.service import GatewayService
from gateway.stores import lock_store, new_process_id, open_configured_store, store_display
from gateway.turns.containment import prepare_sandboxes, protect_process
from gateway.turns.mcp import builtin_names, configured, start_mcp_servers
from gateway.wiring import build_service, demo_model

if TYPE_CHECKING:
    from core.mcp.servers import McpServers
    from gateway.cluster.node import ClusterNode

log = logging.getLogger(__name__)


class StartupError(Exception):
    """The gateway cannot start; the message is one line naming the cause."""


class Gateway:
    """Store, model client and the runtime (service + adapters), with a start/stop life."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.ready = asyncio.Event()
        """Set once everything has started; cleared again by :meth:`stop`."""
        self._store: Store | None = None
        self._model: ModelClient | None = None
        self._service: GatewayService | None = None
        self._lock: StoreFileLock | None = None
        self._process_id = new_process_id(config.cluster.name)
        self._telemetry: telemetry.Telemetry | None = None
        self._mcp: McpServers | None = None

    @property
    def process_id(self) -> str:
        """Who this process is among those sharing the store (gateway.stores)."""
        return self._process_id

    @property
    def store(self) -> Store:
        if self._store is None:
            raise RuntimeError("the gateway is not started")
        return self._store

    @property
    def model(self) -> ModelClient:
        if self._model is None:
            raise RuntimeError("the gateway is not started")
        return self._model

    async def start(self) -> None:
        """Start every part; raises :class:`StartupError` (after undoing what started)."""
        started = False
        try:
            await self._start_parts()
            started = True
        finally:
            if not started:
                await self.stop()
        self.ready.set()
        log.info("ready: the gateway is running (stop with Ctrl-C or SIGTERM)")

    async def _start_parts(self) -> None:
        self._telemetry = telemetry.start(self.config.telemetry, self.process_id)
        gateway = self.config.gateway
        source = self.config.source
        log.info("config: %s", source if source is not None else "built-in defaults (no file)")
        log.info("data dir: %s", gateway.data_dir)
        log.info("database: %s", store_display(self.config))
        self._lock = _lock(self.config)
        self._store = await _open_store(self.config, self.process_id)
        self._model = _build_model(self.config.model)
        _check_profile(self.config)
        _make_workspaces(self.config)
        sandboxes = await prepare_sandboxes(self.config)
        self._mcp = await _start_mcp(self.config)
        node = _cluster_node(self.config, self._store, self.process_id)
        self._service = build_service(
            self.config, self._store, self._model, sandboxes=sandboxes, node=node, mcp=self._mcp
        )
        try:
            await self._service.start()
        except StoreUnavailable as exc:
            raise _unwritable_store(store_display(self.config), exc) from exc
        except Exception as exc:
            raise StartupError(f"cannot start the platform adapters: {_one_line(exc)}") from exc
        _check_ways_in(self._service.directory.adapters)

    async def stop(self) -> None:
        """Close whatever started, in reverse order; safe to call more than once."""
        self.ready.clear()
        service, self._service = self._service, None
        if service is not None:
            await _close("service", service.stop())
        mcp, self._mcp = self._mcp, None
        if mcp is not None:
            await _close("MCP servers", mcp.stop())
        model, self._model = self._model, None
        store, self._store = self._store, None
        if model is not None:
            await _close("model client", model.aclose())
        if store is not None:
            await _close("store", store.close())
            log.info("store closed")
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()
        spans, self._telemetry = self._telemetry, None
        await _close("telemetry", telemetry.stop(spans))  # the last spans flushed


async def _close(what: str, closing: Awaitable[None]) -> None:
    try:
        await closing
    except Exception:
        log.exception("closing the %s failed", what)


async def _start_mcp(config: Config) -> McpServers | None:
    """The ``[mcp]`` servers, started (None: none configured; the SDK is not imported)."""
    if not configured(config):
        return None
    from core.mcp.servers import McpStartError

    try:
        return await start_mcp_servers(config, builtin_names())
    except McpStartError as exc:
        raise StartupError(str(exc)) from exc


def _lock(config: Config) -> StoreFileLock | None:
    """The SQLite file's lock (one process per file); None on PostgreSQL (shared)."""
    try:
        return lock_store(config)
    except StoreFileInUse as exc:
        raise StartupError(str(exc)) from exc
    except OSError as exc:
        where = config.gateway.db_path.parent
        raise StartupError(f"cannot use the data dir {where}: {exc.strerror or exc}") from exc


async def _open_store(config: Config, process_id: str) -> Store:
    try:
        return await open_configured_store(config, process_id=process_id)
    except StoreError as exc:
        raise StartupError(f"cannot open the store: {exc}") from exc
    except OSError as exc:
        where = store_display(config)
        raise StartupError(f"cannot open the store {where}: {exc.strerror or exc}") from exc


def _cluster_node(config: Config, store: Store, process_id: str) -> ClusterNode | None:
    """This process's part in the cluster when the store is PostgreSQL (docs/cluster.md):
    the service starts it once its adapters started and stops it last."""
    if not config.store.postgres:
        return None
    from core.store.postgres import PgStore
    from gateway.cluster.node import ClusterNode

    if not isinstance(store, PgStore):
        return None
    return ClusterNode(store, config.cluster, web_url=None, process_id=process_id)


def _build_model(section: ModelSection) -> ModelClient:
    from core.model.factory import build_model_client

    if section.provider == "demo":
        log.warning("model: using the offline demo provider — no API key configured")
    else:
        log.info("model: %s at %s", section.model, section.base_url)
    if section.timeout is not None:
        log.warning(
            "[model] timeout is deprecated; set connect_timeout, first_byte_timeout and "
            "idle_timeout (it stands in for each of them not set)"
        )
    if section.provider == "demo":
        return demo_model(section.model)  # its answers stream (gateway.wiring)
    try:
        return build_model_client(
            section.provider,
            base_url=section.base_url,
            api_key=section.api_key,
            model=section.model,
            headers=section.headers,
            timeouts=section.timeouts(),
            request_fields=section.request_fields(),
        )
    except ValueError as exc:
        raise StartupError(f"model: {exc}") from exc


def _check_profile(config: Config) -> None:
    profile = config.profile()
    try:
        agent = profile.to_agent_profile()
    except (OSError, UnicodeDecodeError) as exc:
        raise StartupError(f"profile {profile.name}: cannot read SOUL.md: {exc}") from exc
    log.info(
        "profile %s: model %s, max_iterations %d", agent.name, agent.model, agent.max_iterations
    )


def _make_workspaces(config: Config) -> None:
    """Each profile's tools run in its workspace: create it if missing."""
    for name, profile in config.profiles.items():
        try:
            profile.workspace.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            reason = exc.strerror or exc
            raise StartupError(
                f"profile {name}: cannot create workspace {profile.workspace}: {reason}"
            ) from exc


def _check_ways_in(adapters: Sequence[Adapter]) -> None:
    """Raise :class:`StartupError` when every platform is down; warn once when some are."""
    down = [adapter for adapter in adapters if adapter.health.state == "down"]
    if not down:
        return
    reasons = "; ".join(f"{adapter.platform}: {adapter.health.reason}" for adapter in down)
    if len(down) == len(adapters):
        others = "no other platform is" if len(down) == 1 else "no platform is"
        raise StartupError(f"{reasons}; {others} enabled, so nothing could reach the agent")
    running = ", ".join(a.platform for a in adapters if a.health.state != "down")
    log.warning("not running: %s; the gateway runs on with %s", reasons, running)


def _unwritable_store(where: str, exc: StoreUnavailable) -> StartupError:
    """The store opened but cannot be written (read-only file or disk, disk full)."""
    reason = str(exc).rsplit(": ", 1)[-1]
    return StartupError(
        f"the store {where} cannot be written ({reason}); check the disk space and that the "
        "file and its directory are writable"
    )


def _one_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


async def run_until_signalled(gateway: Gateway) -> None:
    """Make the process non-dumpable, start ``gateway``, wait for SIGINT or SIGTERM, then
    stop it."""
    protect_process()
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, _on_signal, signum, stopping)
    try:
        await gateway.start()
        await stopping.wait()
    finally:
        await gateway.stop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    log.info("stopped")


def _on_signal(signum: int, stopping: asyncio.Event) -> None:
    log.info("%s received: stopping", signal.Signals(signum).name)
    stopping.set()
