"""From a validated :class:`~gateway.config.Config` to a :class:`GatewayService`.

The only place that knows both the configuration and the constructors. The service is
built first; then every registered platform (:func:`adapters.platforms.platforms`) whose
section is enabled builds its adapter from its section and an
:class:`~adapters.platforms.AdapterContext` (the store, the command menu), and is
attached. No module here names a platform: adding one is its package plus its registration
(``docs/architecture.md`` §6). A configured platform without an adapter yet is named in
the log, never silently ignored.

The offline demo provider streams its words :data:`DEMO_CHUNK_DELAY` apart
(:func:`demo_model`), so a newcomer sees an answer arrive in the chats that stream it
(docs/architecture.md §13).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from adapters.base import Adapter
from adapters.platforms import AdapterContext, platforms
from core.agent.profile import AgentProfile
from core.hooks.builtin import register_builtin_hooks
from core.hooks.loader import load_hooks
from core.hooks.registry import HookRegistry
from core.model.base import ModelClient
from core.model.demo import DemoModel
from core.model.retry import RetryPolicy
from core.redaction import remember_secrets
from core.store.base import Store
from core.tools.base import ToolRegistry
from core.tools.builtin import builtin_tools
from core.tools.sandbox import Sandbox, Unavailable
from gateway.config import Config
from gateway.config.log_redaction import config_secrets
from gateway.control.access import AccessPolicy
from gateway.control.bot_guard import BotLimits
from gateway.control.syntax import command_menu
from gateway.control.usage import UsageFeature
from gateway.outbound.pipeline import Relay
from gateway.service import ChatPolicy, Engine, GatewayService
from gateway.turns.containment import profile_workspaces, unprobed_sandboxes
from gateway.turns.intake import Attachments, IntakeLimits
from gateway.turns.presets import build_presets
from gateway.turns.progress import ProgressConfig
from gateway.turns.transcription import Transcriber, TranscriptionConfig
from gateway.turns.workspace_files import DownloadDeadline
from gateway.web.compose import mount_web, web_operators

if TYPE_CHECKING:
    from core.mcp.servers import McpServers
    from gateway.cluster.node import ClusterNode
    from gateway.control.memory import MemoryFeature
    from gateway.control.skills import SkillsFeature
    from gateway.schedule.feature import ScheduleFeature
    from gateway.web.metrics import GatewayMetrics

log = logging.getLogger(__name__)

DEMO_CHUNK_DELAY = 0.03
"""Seconds between two words the demo model streams (a real model's pace, about)."""


def demo_model(name: str = "demo") -> ModelClient:
    """The configured demo provider: its answers stream word by word."""
    return DemoModel(name, chunk_delay=DEMO_CHUNK_DELAY)


def build_service(
    config: Config,
    store: Store,
    model: ModelClient,
    *,
    sandboxes: Mapping[str, Sandbox] | None = None,
    node: ClusterNode | None = None,
    mcp: McpServers | None = None,
) -> GatewayService:
    """Compose the engine, the chat layer and every configured adapter.

    ``sandboxes``: each profile's terminal sandbox, as
    :func:`gateway.turns.containment.prepare_sandboxes` probed them (default: chosen unprobed).
    ``node``: this process's cluster node (PostgreSQL store only, docs/cluster.md): the
    leased bots get its relay stage (``node.lease_bots``) and it joins the service.
    ``mcp``: the started ``[mcp]`` servers (:mod:`gateway.turns.mcp`): their tools join
    each profile's registry, their approval policy the hooks, their state the health page.
    The configured secrets are taught to the one redactor before anything can be sent."""
    remember_secrets(config_secrets(config))
    context = AdapterContext(
        store=store,
        commands=tuple(command_menu()) + _schedule_menu(config) + _memory_menu(config),
        data_dir=config.data_dir,
        max_attachment_bytes=config.attachments.max_bytes,
    )
    adapters, builders = _adapters(config, context)
    metrics = _metrics(adapters)
    engine = _engine(config, store, model, sandboxes, metrics, mcp)
    service = GatewayService(
        engine, _chat(config), traffic=metrics.traffic if metrics else None,
        attachments=_attachments(config), presets=build_presets(config.models, config.model),
    )  # fmt: skip
    if mcp is not None:
        service.router.session_ended.append(mcp.end_session)
    attached: Sequence[tuple[Adapter, Relay | None]] = [(a, None) for a in adapters]
    if node is not None:
        attached = node.lease_bots(adapters, builders)
        service.cluster = node
    for adapter, relay in attached:
        service.attach(adapter, relay)
    schedule = _schedule(service, config) if config.schedule.enabled else None
    if metrics is not None:
        _watch(metrics, mcp, node, schedule)
        mount_web(service, metrics)
    return service


def _metrics(adapters: Sequence[Adapter]) -> GatewayMetrics | None:
    """The gateway's metrics (``/metrics``, ``/healthz``, the dashboard) when a platform
    serves HTTP to show them (``Platform.route_host``: the web chat); else none are kept
    and ``prometheus_client`` is not imported (docs/architecture.md §10)."""
    registered = platforms()
    if not any(registered[a.platform].route_host is not None for a in adapters):
        return None
    from gateway.web.metrics import GatewayMetrics

    return GatewayMetrics()


def _watch(
    metrics: GatewayMetrics,
    mcp: McpServers | None,
    node: ClusterNode | None,
    schedule: ScheduleFeature | None,
) -> None:
    """What ``/metrics`` reads when scraped besides its own counters."""
    if mcp is not None:
        metrics.watch_mcp(mcp.status)
    if node is not None:
        metrics.watch_cluster(node.stats)
    if schedule is not None:
        from gateway.web.schedule_status import ScheduleCollector

        metrics.registry.register(ScheduleCollector(schedule.scheduler.figures))


def _schedule_menu(config: Config) -> tuple[tuple[str, str], ...]:
    if not config.schedule.enabled:
        return ()
    from gateway.schedule import MENU

    return MENU


def _memory_menu(config: Config) -> tuple[tuple[str, str], ...]:
    """``/memory`` in the platforms' menus when on (Slack and Discord know only these)."""
    entry = ("memory", "What I remember about you: forget, off, share")
    return (entry,) if config.memory.enabled else ()


def _schedule(service: GatewayService, config: Config) -> ScheduleFeature:
    """``[schedule]`` when enabled; off, nothing of it is imported."""
    from gateway.schedule.feature import ScheduleFeature

    return ScheduleFeature(service, config.schedule)


def _engine(
    config: Config,
    store: Store,
    model: ModelClient,
    sandboxes: Mapping[str, Sandbox] | None,
    metrics: GatewayMetrics | None,
    mcp: McpServers | None = None,
) -> Engine:
    hooks = _hooks(config.data_dir / "hooks")
    if mcp is not None:
        mcp.register_approval(hooks)
    memory = _memory(config, store)
    skills = _skills(config)
    return Engine(
        store=store,
        model=model,
        tools=_tools(config, sandboxes or unprobed_sandboxes(config), mcp, memory, skills),
        memory=memory,
        usage=_usage(config, store, metrics),
        hooks=metrics.observe(hooks) if metrics is not None else hooks,
        profiles=_profiles(config, skills),
        default_profile=config.gateway.default_profile,
        retry=_retry(config),
    )


def _usage(config: Config, store: Store, metrics: GatewayMetrics | None) -> UsageFeature | None:
    """Every model call recorded (and counted on ``/metrics`` when it is served);
    ``[quotas]`` checked when it sets a cap."""
    if metrics is None:
        return UsageFeature.of(store, config)
    from gateway.control.usage.metrics import UsageCounters

    return UsageFeature.of(store, config, UsageCounters(metrics.registry))


def _memory(config: Config, store: Store) -> MemoryFeature | None:
    """``[memory]`` when enabled; off, nothing of it is imported."""
    if not config.memory.enabled:
        return None
    from gateway.control.memory import MemoryFeature

    return MemoryFeature.build(store, config.memory)


def _profiles(config: Config, skills: SkillsFeature | None) -> dict[str, AgentProfile]:
    """Each profile as the engine sees it, with its skills' index when skills are on."""
    profiles = {name: config.agent_profile(name) for name in config.profiles}
    if skills is None:
        return profiles
    return {name: skills.profile(name, profile) for name, profile in profiles.items()}


def _skills(config: Config) -> SkillsFeature | None:
    """``[skills]`` when a skills directory exists and holds a valid skill; else nothing
    of it is imported."""
    if not config.skills.present(config.data_dir):
        return None
    from gateway.control.skills import SkillsFeature

    return SkillsFeature.build(config)


def _chat(config: Config) -> ChatPolicy:
    enabled = config.enabled_platforms()
    return ChatPolicy(
        access={name: _access(config, name) for name in enabled},
        approvers={name: config.approvers(name) for name in platforms()},
        operators=web_operators(config),
        progress=ProgressConfig(
            mode=config.progress.mode,
            cleanup=config.progress.cleanup,
            becomes_reply=config.progress.becomes_reply,
            new_message_after=config.progress.new_message_after,
            reactions=config.progress.reactions,
        ),
    )


def _attachments(config: Config) -> Attachments:
    """``[attachments]``'s limits and ``[transcription]``'s transcriber (docs/attachments.md)."""
    section, spoken = config.attachments, config.transcription
    deadline = DownloadDeadline(section.download_min_seconds, section.download_min_rate)
    limits = IntakeLimits(section.max_bytes, frozenset(section.kinds), deadline)
    outbox = config.data_dir / "outbox"
    if spoken.base_url is None:
        return Attachments(limits, outbox=outbox)
    transcriber = Transcriber(
        TranscriptionConfig(
            base_url=spoken.base_url, model=spoken.model, api_key=spoken.api_key or "",
            timeout=spoken.timeout, language=spoken.language,
        )
    )  # fmt: skip
    return Attachments(limits, transcriber, outbox)


def _adapters(
    config: Config, context: AdapterContext
) -> tuple[list[Adapter], dict[str, Callable[[], Adapter]]]:
    """The configured adapters, and how to build each again (a leased bot's fresh adapter
    after its lease was lost, :mod:`gateway.cluster.bots`)."""
    built: list[Adapter] = []
    builders: dict[str, Callable[[], Adapter]] = {}
    for name, platform in platforms().items():
        section = config.platform(name)
        if section is None:
            continue
        if platform.build is None:
            log.warning("[%s] is configured, but its adapter is not built yet", name)
            continue
        builders[name] = partial(platform.build, section, context)
        built.append(builders[name]())
    if not built:
        log.info("no chat platform is configured: nothing can reach the agent")
    return built, builders


def _tools(
    config: Config,
    sandboxes: Mapping[str, Sandbox],
    mcp: McpServers | None = None,
    memory: MemoryFeature | None = None,
    skills: SkillsFeature | None = None,
) -> dict[str, ToolRegistry]:
    """Each profile's tools: its sessions' workspaces, its terminal sandbox, the tools of
    the MCP servers it names (``mcp_servers``; default: all), the web tools its ``tools``
    list names (``[web_tools]``), the ``skill`` tool over its skills (mounted read-only in
    its sandbox)."""
    if skills is not None:
        sandboxes = {name: skills.sandbox(name, sandbox) for name, sandbox in sandboxes.items()}
    return {
        name: ToolRegistry(
            builtin_tools(
                workspaces=profile_workspaces(profile),
                sandbox=sandboxes.get(name, Unavailable("no sandbox was prepared")),
                disk_quota=profile.sandbox_limits().disk_quota,
            )
            + ([] if memory is None else memory.tools(name))
            + ([] if skills is None else skills.tools(name, sandboxes.get(name, Unavailable(""))))
            + config.web_tools.tools(profile.tools),
            sources=[] if mcp is None else [mcp.tools(profile.mcp_servers)],
        )
        for name, profile in config.profiles.items()
    }


def _retry(config: Config) -> RetryPolicy:
    """``[model] max_retries`` and ``slow_notice_seconds`` for every agent's model calls."""
    model = config.model
    return RetryPolicy.with_retries(
        model.max_retries, slow_notice_seconds=model.slow_notice_seconds
    )


def _hooks(directory: Path) -> HookRegistry:
    hooks = HookRegistry()
    register_builtin_hooks(hooks)
    report = load_hooks(hooks, directory=directory if directory.is_dir() else None)
    for error in report.errors:
        log.error("hook not loaded: %s: %s", error.source, error.message)
    return hooks


def _access(config: Config, platform: str) -> AccessPolicy:
    section = config.platform(platform)
    assert section is not None
    return AccessPolicy(
        allowed_users=config.allowed_users(platform),
        approvers=config.approvers(platform),
        require_mention=section.mention_required(),
        allow_bots=section.bots_allowed(),
        bot_limits=BotLimits(*section.bot_pace()),
        pairing=section.pairing,
        owners=section.owners,
        pairing_ttl=section.pairing_ttl,
    )
