"""The typed, validated configuration: frozen values, one per ``config.toml`` section.

``config.example.toml`` documents every key. A field whose ``metadata`` carries
``secret=True`` is never printed in full (see :mod:`gateway.config_render`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from core.agent.profile import DEFAULT_MAX_ITERATIONS, AgentProfile, BusyPolicy
from core.tools.sandbox import SandboxKind, WorkspaceScope

Provider = Literal["openai", "demo"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
ProgressMode = Literal["off", "new", "all"]
GroupSessions = Literal["per_user", "shared"]
TelegramMode = Literal["polling", "webhook"]
SlackMode = Literal["socket", "http"]

PLATFORMS = ("telegram", "discord", "slack", "web")
DB_FILENAME = "commonos.db"
DEFAULT_SOUL = AgentProfile().soul

SECRET: Mapping[str, Any] = {"secret": True}


def secret(default: str | None = None) -> Any:
    """A dataclass field holding a secret: masked whenever the config is shown."""
    return field(default=default, metadata=SECRET, repr=False)


@dataclass(frozen=True, slots=True)
class GatewaySection:
    data_dir: Path
    log_level: LogLevel = "INFO"
    default_profile: str = "default"

    @property
    def db_path(self) -> Path:
        return self.data_dir / DB_FILENAME


@dataclass(frozen=True, slots=True)
class ModelSection:
    provider: Provider = "demo"
    base_url: str = "https://api.openai.com/v1"
    api_key: str | None = secret()
    model: str = "demo"
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 120.0
    max_retries: int = 3
    slow_notice_seconds: float = 20.0
    """Tell the chat after this long without an answer from the model; 0: never."""


@dataclass(frozen=True, slots=True)
class ProfileSection:
    name: str
    model: str
    workspace: Path
    system_prompt_file: Path | None = None
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    run_budget_seconds: float | None = None
    review_input_budget: int | None = None
    tools: tuple[str, ...] | None = None
    approval_timeout: float = 300.0
    busy_policy: BusyPolicy = "queue"
    queue_limit: int = 20
    stream: bool = False
    external_runtime: tuple[str, ...] | None = None
    workspace_scope: WorkspaceScope = "session"
    """``session``: a workspace per session under ``workspace``; ``profile``: one, shared."""
    sandbox: SandboxKind = "bwrap"
    """Where the terminal runs: ``bwrap`` (bubblewrap) or ``none`` (the host shell)."""
    sandbox_network: bool = False
    """Whether sandboxed commands may use the network."""

    def soul(self) -> str:
        """The text of the profile's SOUL.md (the built-in prompt when none is set)."""
        if self.system_prompt_file is None:
            return DEFAULT_SOUL
        return self.system_prompt_file.read_text(encoding="utf-8")

    def to_agent_profile(self) -> AgentProfile:
        """The engine's view of this profile; reads SOUL.md now (OSError if it vanished)."""
        return AgentProfile(
            name=self.name,
            model=self.model,
            soul=self.soul(),
            soul_path=self.system_prompt_file,
            max_iterations=self.max_iterations,
            run_budget_seconds=self.run_budget_seconds,
            review_input_budget=self.review_input_budget,
            tools=self.tools,
            workspace=self.workspace,
            approval_timeout=self.approval_timeout,
            busy_policy=self.busy_policy,
            queue_limit=self.queue_limit,
            stream=self.stream,
            external_runtime=self.external_runtime,
        )


@dataclass(frozen=True, slots=True)
class ProgressSection:
    mode: ProgressMode = "new"
    cleanup: bool = True


@dataclass(frozen=True, slots=True)
class TelegramSection:
    token: str = secret("")
    base_url: str = "https://api.telegram.org/bot"
    base_file_url: str = "https://api.telegram.org/file/bot"
    mode: TelegramMode = "polling"
    webhook_url: str | None = None
    webhook_secret: str | None = secret()
    webhook_listen: str = "127.0.0.1:8443"
    group_sessions: GroupSessions = "per_user"
    require_mention: bool = True
    allow_bots: bool = False
    allowed_users: frozenset[str] = frozenset()
    approvers: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class DiscordSection:
    token: str = secret("")
    api_base: str = "https://discord.com/api/v10"
    gateway_url: str | None = None
    group_sessions: GroupSessions = "per_user"
    require_mention: bool = True
    allow_bots: bool = False
    allowed_users: frozenset[str] = frozenset()
    approvers: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class SlackSection:
    bot_token: str = secret("")
    app_token: str | None = secret()
    signing_secret: str | None = secret()
    api_base_url: str = "https://slack.com/api/"
    mode: SlackMode = "socket"
    http_listen: str = "127.0.0.1:3000"
    group_sessions: GroupSessions = "per_user"
    require_mention: bool = True
    allow_bots: bool = False
    allowed_users: frozenset[str] = frozenset()
    approvers: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class WebSection:
    """``[web]``: the built-in web chat and dashboard (on by default, loopback only)."""

    listen: str = "127.0.0.1:8765"
    token: str | None = secret()
    """Required by every request when set; required for a non-loopback ``listen``."""
    name: str = "local"
    """Who the person at the browser is: ``web:<name>`` for approvals and allowlists."""
    allowed_users: frozenset[str] = frozenset()
    approvers: frozenset[str] = frozenset()


PlatformSection = TelegramSection | DiscordSection | SlackSection


@dataclass(frozen=True, slots=True)
class Config:
    """The whole effective configuration; ``source`` is None for built-in defaults."""

    source: Path | None
    gateway: GatewaySection
    model: ModelSection
    profiles: Mapping[str, ProfileSection]
    progress: ProgressSection = ProgressSection()
    approvals: Mapping[str, frozenset[str]] = field(default_factory=dict)
    access: Mapping[str, frozenset[str]] = field(default_factory=dict)
    telegram: TelegramSection | None = None
    discord: DiscordSection | None = None
    slack: SlackSection | None = None
    web: WebSection | None = None

    def profile(self, name: str | None = None) -> ProfileSection:
        """The named profile (KeyError if unknown), or the default one."""
        return self.profiles[name or self.gateway.default_profile]

    def agent_profile(self, name: str | None = None) -> AgentProfile:
        return self.profile(name).to_agent_profile()

    def platform(self, name: str) -> PlatformSection | None:
        section = {"telegram": self.telegram, "discord": self.discord, "slack": self.slack}
        return section.get(name)

    def approvers(self, platform: str) -> frozenset[str]:
        """User ids allowed to approve on ``platform``: ``[approvals]`` ∪ the section's.

        Always explicit ids: the config reader refuses ``"*"`` in either list.
        """
        section = self.platform(platform)
        own = section.approvers if section is not None else frozenset()
        return self.approvals.get(platform, frozenset()) | own

    def allowed_users(self, platform: str) -> frozenset[str]:
        """User ids allowed to talk on ``platform``: ``[access]`` ∪ the section's."""
        section = self.platform(platform)
        own = section.allowed_users if section is not None else frozenset()
        return self.access.get(platform, frozenset()) | own

    def enabled_platforms(self) -> list[str]:
        present = {"telegram": self.telegram, "discord": self.discord, "slack": self.slack}
        names = [name for name, section in present.items() if section is not None]
        return [*names, "web"] if self.web is not None else names
