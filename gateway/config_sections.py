"""One reader per ``config.toml`` section: TOML table → typed section value.

Each reader takes a :class:`~gateway.config_reader.Table` (which collects errors) and a
:class:`Context` (where relative paths start, the environment for secrets) and always
returns a usable value; the caller raises once all errors are known.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from core.agent.profile import BusyPolicy
from core.tools.sandbox import SandboxKind, WorkspaceScope
from gateway.config_reader import Table, got, show
from gateway.config_schema import (
    PLATFORMS,
    DiscordSection,
    GatewaySection,
    GroupSessions,
    LogLevel,
    ModelSection,
    ProfileSection,
    ProgressMode,
    ProgressSection,
    Provider,
    SlackMode,
    SlackSection,
    TelegramMode,
    TelegramSection,
    WebSection,
)

LOG_LEVELS: tuple[LogLevel, ...] = ("DEBUG", "INFO", "WARNING", "ERROR")
PROVIDERS: tuple[Provider, ...] = ("openai", "demo")
BUSY_POLICIES: tuple[BusyPolicy, ...] = ("queue", "interrupt", "steer")
WORKSPACE_SCOPES: tuple[WorkspaceScope, ...] = ("session", "profile")
SANDBOXES: tuple[SandboxKind, ...] = ("bwrap", "none")
PROGRESS_MODES: tuple[ProgressMode, ...] = ("off", "new", "all")
GROUP_SESSIONS: tuple[GroupSessions, ...] = ("per_user", "shared")
TELEGRAM_MODES: tuple[TelegramMode, ...] = ("polling", "webhook")
SLACK_MODES: tuple[SlackMode, ...] = ("socket", "http")
OPENAI_MODEL = "gpt-4o-mini"

# Default values of each section (slotted dataclasses keep no class-level defaults).
MODEL, PROGRESS, WEB = ModelSection(), ProgressSection(), WebSection()
TELEGRAM, DISCORD, SLACK = TelegramSection(), DiscordSection(), SlackSection()


@dataclass(frozen=True, slots=True)
class Context:
    base_dir: Path
    """Directory relative paths start from: the config file's, or the working directory."""
    env: Mapping[str, str]

    def path(self, text: str) -> Path:
        return (self.base_dir / Path(text).expanduser()).resolve()

    def env_value(self, name: str) -> str | None:
        return self.env.get(name) or None


# shared field kinds ----------------------------------------------------------
APPROVALS_TABLE = "approvals"
EVERYONE = "*"
NO_WILDCARD_APPROVERS = (
    f'approvers must be explicit user ids; "{EVERYONE}" would let anyone approve'
)


def read_approvers(table: Table, key: str = "approvers") -> frozenset[str]:
    """User ids allowed to approve; ``"*"`` is refused (anyone could approve anything)."""
    ids = table.ids(key)
    if EVERYONE in ids:
        table.error(key, NO_WILDCARD_APPROVERS)
        return ids - {EVERYONE}
    return ids


def read_secret(table: Table, key: str, ctx: Context, env_var: str) -> str | None:
    """The secret from env ``env_var`` (which wins), else from the file."""
    in_file = table.optional_string(key)
    return ctx.env_value(env_var) or in_file


def require(table: Table, key: str, value: str | None, env_var: str, why: str) -> str:
    if value:
        return value
    because = f" {why}" if why else ""
    table.error(key, f"missing secret{because}: set {key} here or the env var {env_var}")
    return ""


def read_url(table: Table, key: str, default: str) -> str:
    return _checked_url(table, key, table.string(key, default), default) or default


def read_optional_url(table: Table, key: str) -> str | None:
    return _checked_url(table, key, table.optional_string(key), None)


def _checked_url(table: Table, key: str, value: str | None, fallback: str | None) -> str | None:
    if value is None or value.startswith(("http://", "https://")):
        return value
    table.error(key, f"expected an http:// or https:// URL, got {show(value)}")
    return fallback


def read_listen(table: Table, key: str, default: str) -> str:
    """A ``host:port`` address to listen on."""
    value = table.string(key, default)
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        table.error(key, f'expected "host:port" (e.g. "127.0.0.1:8080"), got {show(value)}')
        return default
    return value


def read_log_level(table: Table) -> LogLevel:
    value = table.raw("log_level")
    if value is None:
        return "INFO"
    for level in LOG_LEVELS:
        if isinstance(value, str) and value.upper() == level:
            return level
    table.error("log_level", f"expected one of {', '.join(LOG_LEVELS)}, {got(value)}")
    return "INFO"


# sections --------------------------------------------------------------------
def read_gateway(table: Table, ctx: Context, home: Path) -> GatewaySection:
    data_dir = table.optional_string("data_dir")
    section = GatewaySection(
        data_dir=ctx.path(data_dir) if data_dir else home,
        log_level=read_log_level(table),
        default_profile=table.string("default_profile", "default"),
    )
    table.finish()
    return section


def read_model(table: Table, ctx: Context) -> ModelSection:
    api_key = read_secret(table, "api_key", ctx, "COMMONOS_MODEL_API_KEY")
    implied: Provider = "openai" if api_key else "demo"
    provider = table.choice("provider", PROVIDERS, implied)
    if provider == "openai":
        api_key = api_key or ctx.env_value("OPENAI_API_KEY")
        why = 'for provider = "openai"'
        api_key = require(table, "api_key", api_key, "COMMONOS_MODEL_API_KEY", why)
    section = ModelSection(
        provider=provider,
        base_url=read_url(table, "base_url", MODEL.base_url),
        api_key=api_key if provider == "openai" else None,
        model=table.string("model", OPENAI_MODEL if provider == "openai" else "demo"),
        headers=table.string_map("headers"),
        timeout=table.positive_number("timeout", MODEL.timeout),
        max_retries=table.non_negative_int("max_retries", MODEL.max_retries),
        slow_notice_seconds=_seconds_or_off(table, "slow_notice_seconds", MODEL),
    )
    table.finish()
    return section


def _seconds_or_off(table: Table, key: str, defaults: ModelSection) -> float:
    """A number of seconds ≥ 0 (0 turns the feature off)."""
    value, default = table.raw(key), float(getattr(defaults, key))
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
        table.error(key, f"expected a number of seconds ≥ 0 (0 turns it off), {got(value)}")
        return default
    return float(value)


def read_profile(
    table: Table,
    name: str,
    ctx: Context,
    defaults: ProfileSection,
    *,
    data_dir: Path | None = None,
) -> ProfileSection:
    """``[profiles.<name>]``. ``defaults.workspace`` is the root of the profiles' default
    workspaces (``<root>/<name>``); ``data_dir``, when given, is checked against it."""
    workspace = table.optional_string("workspace")
    profile = ProfileSection(
        name=name,
        model=table.string("model", defaults.model),
        workspace=ctx.path(workspace) if workspace else defaults.workspace / name,
        system_prompt_file=_soul_file(table, ctx),
        max_iterations=table.positive_int("max_iterations", defaults.max_iterations),
        run_budget_seconds=table.optional_positive_number("run_budget_seconds"),
        review_input_budget=table.optional_positive_int("review_input_budget"),
        tools=table.strings("tools"),
        approval_timeout=table.positive_number("approval_timeout", defaults.approval_timeout),
        busy_policy=table.choice("busy_policy", BUSY_POLICIES, defaults.busy_policy),
        queue_limit=table.positive_int("queue_limit", defaults.queue_limit),
        stream=table.boolean("stream", defaults.stream),
        external_runtime=_external_runtime(table),
        workspace_scope=table.choice("workspace_scope", WORKSPACE_SCOPES, "session"),
        sandbox=table.choice("sandbox", SANDBOXES, defaults.sandbox),
        sandbox_network=table.boolean("sandbox_network", defaults.sandbox_network),
    )
    if data_dir is not None:
        _check_workspace(table, profile.workspace, data_dir)
    table.finish()
    return profile


def _check_workspace(table: Table, workspace: Path, data_dir: Path) -> None:
    """The workspace may sit inside the data directory, never be it or contain it: the
    tools would see the database and the other sessions' files."""
    ws, data = workspace.resolve(), data_dir.resolve()
    if data == ws or data.is_relative_to(ws):
        table.error("workspace", f"must not be the data directory or contain it ({data})")


def _soul_file(table: Table, ctx: Context) -> Path | None:
    text = table.optional_string("system_prompt_file")
    if text is None:
        return None
    path = ctx.path(text)
    if not path.is_file():
        table.error("system_prompt_file", f"file not found: {path}")
        return None
    return path


def _external_runtime(table: Table) -> tuple[str, ...] | None:
    argv = table.strings("external_runtime")
    if argv == ():
        table.error("external_runtime", "expected a command line (array of strings), got []")
        return None
    return argv


def read_user_lists(table: Table) -> dict[str, frozenset[str]]:
    """``[approvals]`` / ``[access]``: one array of user ids per platform.

    ``"*"`` (everyone) is allowed in ``[access]`` only: approvers must be named.
    """
    if table.path == APPROVALS_TABLE:
        lists = {platform: read_approvers(table, platform) for platform in PLATFORMS}
    else:
        lists = {platform: table.ids(platform) for platform in PLATFORMS}
    table.finish()
    return {platform: ids for platform, ids in lists.items() if ids}


def read_progress(table: Table) -> ProgressSection:
    section = ProgressSection(
        mode=table.choice("mode", PROGRESS_MODES, PROGRESS.mode),
        cleanup=table.boolean("cleanup", PROGRESS.cleanup),
    )
    table.finish()
    return section


WEB_TOKEN_ENV = "COMMONOS_WEB_TOKEN"
WEB_LISTEN_ENV = "COMMONOS_WEB_LISTEN"
WEB_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")


def read_web(table: Table, ctx: Context) -> WebSection:
    """``[web]``; ``listen`` may come from env ``COMMONOS_WEB_LISTEN`` (which wins), the
    token from ``COMMONOS_WEB_TOKEN``. A non-loopback ``listen`` without a token is an
    error: the chat would be open to the network."""
    env_listen = ctx.env_value(WEB_LISTEN_ENV)
    listen = read_listen(table, "listen", WEB.listen)
    if env_listen is not None:
        listen = read_listen(Table({"listen": env_listen}, table.path, table.log), "listen", listen)
    token = read_secret(table, "token", ctx, WEB_TOKEN_ENV)
    name = table.string("name", WEB.name)
    if WEB_NAME.fullmatch(name) is None:
        table.error("name", f"expected 1-64 characters of A-Z a-z 0-9 _ . @ -, got {show(name)}")
        name = WEB.name
    section = WebSection(
        listen=listen,
        token=token,
        name=name,
        allowed_users=table.ids("allowed_users"),
        approvers=read_approvers(table, "approvers"),
    )
    if section.token is None and not _loopback(listen.rpartition(":")[0]):
        table.error(
            "listen",
            f"{show(listen)} is not a loopback address: set [web] token (or the env var "
            f"{WEB_TOKEN_ENV}) so that every request needs it",
        )
    table.finish()
    return section


def _loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


# platforms -------------------------------------------------------------------
class ChatRules(TypedDict):
    """The keys every chat platform section shares (who may talk, where, and approve)."""

    group_sessions: GroupSessions
    require_mention: bool
    allow_bots: bool
    allowed_users: frozenset[str]
    approvers: frozenset[str]


def read_chat_rules(table: Table) -> ChatRules:
    return ChatRules(
        group_sessions=table.choice("group_sessions", GROUP_SESSIONS, "per_user"),
        require_mention=table.boolean("require_mention", True),
        allow_bots=table.boolean("allow_bots", False),
        allowed_users=table.ids("allowed_users"),
        approvers=read_approvers(table),
    )


def read_telegram(table: Table, ctx: Context, enabled: bool) -> TelegramSection:
    token = read_secret(table, "token", ctx, "COMMONOS_TELEGRAM_TOKEN")
    mode = table.choice("mode", TELEGRAM_MODES, "polling")
    section = TelegramSection(
        token=require(table, "token", token, "COMMONOS_TELEGRAM_TOKEN", "") if enabled else "",
        base_url=read_url(table, "base_url", TELEGRAM.base_url),
        base_file_url=read_url(table, "base_file_url", TELEGRAM.base_file_url),
        mode=mode,
        webhook_url=read_optional_url(table, "webhook_url"),
        webhook_secret=read_secret(
            table, "webhook_secret", ctx, "COMMONOS_TELEGRAM_WEBHOOK_SECRET"
        ),
        webhook_listen=read_listen(table, "webhook_listen", TELEGRAM.webhook_listen),
        **read_chat_rules(table),
    )
    if enabled and mode == "webhook":
        if section.webhook_url is None:
            table.error("webhook_url", 'required when mode = "webhook"')
        secret = section.webhook_secret
        require(table, "webhook_secret", secret, "COMMONOS_TELEGRAM_WEBHOOK_SECRET", "")
    table.finish()
    return section


def read_discord(table: Table, ctx: Context, enabled: bool) -> DiscordSection:
    token = read_secret(table, "token", ctx, "COMMONOS_DISCORD_TOKEN")
    section = DiscordSection(
        token=require(table, "token", token, "COMMONOS_DISCORD_TOKEN", "") if enabled else "",
        api_base=read_url(table, "api_base", DISCORD.api_base),
        gateway_url=_ws_url(table, "gateway_url"),
        **read_chat_rules(table),
    )
    table.finish()
    return section


def _ws_url(table: Table, key: str) -> str | None:
    value = table.optional_string(key)
    if value is not None and not value.startswith(("ws://", "wss://")):
        table.error(key, f"expected a ws:// or wss:// URL, got {show(value)}")
        return None
    return value


SLACK_SECRETS = {
    "bot_token": "COMMONOS_SLACK_BOT_TOKEN",
    "app_token": "COMMONOS_SLACK_APP_TOKEN",
    "signing_secret": "COMMONOS_SLACK_SIGNING_SECRET",
}


def read_slack(table: Table, ctx: Context, enabled: bool) -> SlackSection:
    mode = table.choice("mode", SLACK_MODES, "socket")
    secrets = {key: read_secret(table, key, ctx, env) for key, env in SLACK_SECRETS.items()}
    needed = ("bot_token", "app_token" if mode == "socket" else "signing_secret")
    for key in needed if enabled else ():
        why = "" if key == "bot_token" else f'(mode = "{mode}")'
        secrets[key] = require(table, key, secrets[key], SLACK_SECRETS[key], why)
    section = SlackSection(
        bot_token=secrets["bot_token"] or "",
        app_token=secrets["app_token"],
        signing_secret=secrets["signing_secret"],
        api_base_url=read_url(table, "api_base_url", SLACK.api_base_url),
        mode=mode,
        http_listen=read_listen(table, "http_listen", SLACK.http_listen),
        **read_chat_rules(table),
    )
    table.finish()
    return section
