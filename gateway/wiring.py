"""From a validated :class:`~gateway.config_schema.Config` to a :class:`GatewayService`.

This is the only place that knows both the config schema and the constructors of the
engine, the gateway and the adapters. Platforms whose adapter is not built yet are named
in the log, never silently ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from adapters.base import Adapter
from adapters.session_keys import KeyStrategy, key_rule
from adapters.telegram import TelegramAdapter, TelegramSettings, WebhookSettings
from core.hooks.builtin import register_builtin_hooks
from core.hooks.loader import load_hooks
from core.hooks.registry import HookRegistry
from core.model.base import ModelClient
from core.model.retry import RetryPolicy
from core.redaction import remember_secrets
from core.store.base import Store
from core.tools.base import ToolRegistry
from core.tools.builtin import builtin_tools
from core.tools.sandbox import Sandbox, Unavailable
from gateway.access import AccessPolicy, qualified
from gateway.commands import command_menu
from gateway.config_schema import Config, TelegramSection
from gateway.containment import profile_workspaces, unprobed_sandboxes
from gateway.log_redaction import config_secrets
from gateway.progress import ProgressConfig
from gateway.service import GatewayService
from gateway.web.compose import mount_web, web_access, web_adapter, web_approvers
from gateway.web.metrics import GatewayMetrics

log = logging.getLogger(__name__)

WIRED_PLATFORMS = ("telegram",)


def build_service(
    config: Config,
    store: Store,
    model: ModelClient,
    *,
    sandboxes: Mapping[str, Sandbox] | None = None,
) -> GatewayService:
    """Compose the engine, the chat layer and every configured adapter.

    ``sandboxes``: each profile's terminal sandbox, as
    :func:`gateway.containment.prepare_sandboxes` probed them (default: chosen unprobed).
    The configured secrets are taught to the one redactor before anything can be sent."""
    remember_secrets(config_secrets(config))
    holder: list[GatewayService] = []
    metrics = GatewayMetrics()
    adapters = metrics.count(_adapters(config, store, holder))
    service = GatewayService(
        store=store,
        model=model,
        tools=_tools(config, sandboxes or unprobed_sandboxes(config)),
        hooks=metrics.observe(_hooks(config.gateway.data_dir / "hooks")),
        adapters=adapters,
        profiles={name: config.agent_profile(name) for name in config.profiles},
        default_profile=config.gateway.default_profile,
        access={
            **{p: _access(config, p) for p in WIRED_PLATFORMS if config.platform(p)},
            **({"web": web_access(config)} if config.web is not None else {}),
        },
        approvers={p: config.approvers(p) for p in WIRED_PLATFORMS}
        | {"web": web_approvers(config)},
        operators=frozenset(qualified("web", name) for name in web_approvers(config)),
        progress=ProgressConfig(mode=config.progress.mode, cleanup=config.progress.cleanup),
        retry=_retry(config),
    )
    holder.append(service)
    mount_web(service, metrics)
    return service


def _tools(config: Config, sandboxes: Mapping[str, Sandbox]) -> dict[str, ToolRegistry]:
    """Each profile's tools: its sessions' workspaces, its terminal sandbox."""
    return {
        name: ToolRegistry(
            builtin_tools(
                workspaces=profile_workspaces(profile),
                sandbox=sandboxes.get(name, Unavailable("no sandbox was prepared")),
            )
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
        require_mention=section.require_mention,
        allow_bots=section.allow_bots,
    )


def _adapters(config: Config, store: Store, holder: list[GatewayService]) -> list[Adapter]:
    adapters: list[Adapter] = []
    if config.telegram is not None:
        adapters.append(_telegram(config.telegram, store, holder))
    if config.web is not None:
        adapters.append(web_adapter(config.web, store, _settled(holder)))
    for platform in config.enabled_platforms():
        if platform not in (*WIRED_PLATFORMS, "web"):
            log.warning("[%s] is configured, but its adapter is not built yet", platform)
    if not adapters:
        log.info("no platform adapters configured")
    return adapters


def _settled(holder: list[GatewayService]) -> Callable[[str, str], Awaitable[bool]]:
    async def update_settled(session_key: str, update_id: str) -> bool:
        return await holder[0].update_settled(session_key, update_id)

    return update_settled


def _telegram(
    section: TelegramSection, store: Store, holder: list[GatewayService]
) -> TelegramAdapter:
    async def update_settled(session_key: str, update_id: str) -> bool:
        return await holder[0].update_settled(session_key, update_id)

    settings = TelegramSettings(
        base_url=section.base_url,
        base_file_url=section.base_file_url,
        commands=command_menu(),
        webhook=_webhook(section),
    )
    rule = key_rule(KeyStrategy(group=section.group_sessions))
    return TelegramAdapter(
        section.token, store, settings, key_rule=rule, update_settled=update_settled
    )


def _webhook(section: TelegramSection) -> WebhookSettings | None:
    if section.mode != "webhook":
        return None
    host, _, port = section.webhook_listen.rpartition(":")
    return WebhookSettings(
        secret_token=section.webhook_secret or "",
        public_url=section.webhook_url or "",
        listen=host,
        port=int(port),
    )
