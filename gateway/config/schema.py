"""The gateway's own ``config.toml`` sections, and :class:`Config`, the whole of it.

Here: ``[gateway]``, ``[model]`` and ``[models.<name>]`` (one model endpoint each),
``[profiles.<name>]``; the chat-side sections (``[attachments]``, ``[transcription]``,
``[progress]``) are :mod:`gateway.config.sections`.

Platform sections are declared by their adapter packages (``adapters/<name>/config.py``)
and found through the platform registry; everything here is the same kind of frozen model
(:class:`adapters.config.Section`). ``config.example.toml`` documents every key, and a
test keeps it in step with these models.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from adapters.config import (
    Flag,
    Headers,
    HttpUrl,
    NonNegativeInt,
    PlatformSection,
    PositiveInt,
    PositiveNumber,
    SecondsOrOff,
    Section,
    Text,
    Texts,
    choice,
    secret_field,
)
from adapters.config_reader import Check, ReadContext, got, hidden_field, invalid, show
from core.agent.context import DEFAULT_COMPACT_AT, DEFAULT_CONTEXT_WINDOW
from core.agent.profile import DEFAULT_MAX_ITERATIONS, AgentProfile, BusyPolicy
from core.model.timeouts import Timeouts
from core.tools import limits
from core.tools.sandbox import SandboxKind, WorkspaceScope
from gateway.config.mcp import McpSection
from gateway.config.memory import MemorySection
from gateway.config.quotas import Price, QuotasSection
from gateway.config.schedule import ScheduleSection
from gateway.config.sections import (
    AttachmentsSection,
    ClusterSection,
    ProgressSection,
    StoreSection,
    TelemetrySection,
    TranscriptionSection,
)
from gateway.config.skills import SkillsSection
from gateway.config.web_tools import WebToolsSection

Provider = Literal["openai", "demo"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]

DB_FILENAME = "commonos.db"
DEFAULT_SOUL = AgentProfile().soul
OPENAI_MODEL = "gpt-4o-mini"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
SANDBOX_SIZES = (
    "sandbox_memory_mb",
    "sandbox_cpu_seconds",
    "sandbox_file_size_mb",
    "sandbox_disk_quota_mb",
)
SANDBOX_MAX = 1 << 30
"""The largest ``sandbox_*`` size (MB) or CPU time (s): beyond it a limit means nothing."""


def _log_level(value: object) -> str:
    if isinstance(value, str) and value.upper() in LOG_LEVELS:
        return value.upper()
    raise invalid(
        f"expected one of {', '.join(LOG_LEVELS)}, got {show(value)} (string)"
        if isinstance(value, str)
        else f"expected one of {', '.join(LOG_LEVELS)}, got {show(value)}"
    )


def _path(value: object, context: ReadContext) -> Path:
    """A path; relative ones start at the config file's directory."""
    if not isinstance(value, str | Path) or not str(value).strip():
        raise invalid(f"expected a non-empty string, got {show(value)}")
    base = context.base_dir
    return (base / Path(value).expanduser()).resolve()


def _existing_file(value: object, context: ReadContext) -> Path:
    path = _path(value, context)
    if not path.is_file():
        raise invalid(f"file not found: {path}")
    return path


def _share(value: object) -> float:
    """A share of the context window: a number above 0 and at most 1."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 1:
        return float(value)
    raise invalid(f"expected a number above 0 and at most 1, got {show(value)}")


Share = Annotated[float, Check(_share)]
ConfigPath = Annotated[Path, Check(_path)]
ExistingFile = Annotated[Path, Check(_existing_file)]


UNSET = Path()
"""A path key left out (the loader fills in its default; a path given is absolute)."""


class GatewaySection(Section):
    data_dir: ConfigPath = UNSET
    """Default: ``$COMMONOS_HOME`` (filled in by the loader)."""
    log_level: Annotated[LogLevel, Check(_log_level)] = "INFO"
    default_profile: Text = "default"

    @property
    def db_path(self) -> Path:
        return self.data_dir / DB_FILENAME


RESERVED_BODY_KEYS = ("model", "messages", "tools", "stream", "stream_options")
"""Request fields ``extra_body`` cannot set: the gateway owns them."""
NAMED_BODY_KEYS = ("max_tokens", "temperature", "top_p")


def _between(low: float, high: float) -> Any:
    """A number from ``low`` to ``high`` (both included)."""

    def check(value: object) -> float:
        what = f"a number from {low:g} to {high:g}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise invalid(f"expected {what}, {got(value)}")
        if not low <= value <= high:
            raise invalid(f"expected {what}, got {value}")
        return float(value)

    return Check(check)


def _extra_body(value: object) -> object:
    if not isinstance(value, dict):
        raise invalid(f"expected a table, {got(value)}")
    reserved = [key for key in RESERVED_BODY_KEYS if key in value]
    if reserved:
        names = ", ".join(reserved)
        raise invalid(f"{names} cannot be set here: the gateway sends them itself")
    named = [key for key in NAMED_BODY_KEYS if key in value]
    if named:
        key = named[0]
        raise invalid(f"set {key} as [model] {key}, not in extra_body")
    return value


class ModelSection(Section):
    provider: Annotated[Provider, Check(choice("openai", "demo"))] = "demo"
    """Default: ``openai`` when an API key is configured, else ``demo``."""
    base_url: HttpUrl = "https://api.openai.com/v1"
    api_key: str | None = secret_field("COMMONOS_MODEL_API_KEY")
    model: Text = "demo"
    """Default: ``gpt-4o-mini`` for openai, ``demo`` for the demo."""
    headers: Headers = field(default_factory=dict)
    connect_timeout: PositiveNumber | None = None
    """Seconds to open the connection. Default: 10 (or ``timeout`` when that is set)."""
    first_byte_timeout: PositiveNumber | None = None
    """Seconds from the request to the first byte of the answer (non-stream: the whole
    answer). Default: 120 (or ``timeout``)."""
    idle_timeout: PositiveNumber | None = None
    """Longest gap between two stream chunks (keep-alive pings count). Default: 60 (or
    ``timeout``)."""
    timeout: PositiveNumber | None = None
    """Deprecated: one value for each of the three above that is not set."""
    max_retries: NonNegativeInt = 3
    slow_notice_seconds: SecondsOrOff = 20.0
    """Tell the chat after this long without an answer from the model; 0: never."""
    # request fields sent with every model call (docs/turn-loop.md §4, "Request fields")
    max_tokens: PositiveInt | None = None
    """The longest answer, in tokens; unset: the server's limit (llama-server: none)."""
    temperature: Annotated[float, _between(0, 2)] | None = None
    top_p: Annotated[float, _between(0, 1)] | None = None
    extra_body: Annotated[dict[str, Any], Check(_extra_body)] = field(default_factory=dict)
    """Any other top-level request fields, merged into every request body."""

    def request_fields(self) -> dict[str, object]:
        """The fields the model client adds to every request body."""
        named = {key: getattr(self, key) for key in NAMED_BODY_KEYS}
        return {**self.extra_body, **{k: v for k, v in named.items() if v is not None}}

    context_window: PositiveInt = DEFAULT_CONTEXT_WINDOW
    """The model's context window in tokens (a profile may override it)."""
    compact_at: Share = DEFAULT_COMPACT_AT
    """Compact older turns when the next request would pass this share of the window."""

    @classmethod
    def prepared(cls, data: dict[str, Any], context: ReadContext) -> dict[str, Any]:
        """The provider follows the key; the model name follows the provider."""
        provider = data.setdefault("provider", "openai" if data.get("api_key") else "demo")
        if provider == "openai" and not data.get("api_key"):
            fallback = context.env.get("OPENAI_API_KEY")
            if fallback:
                data["api_key"] = fallback
        if provider == "demo":
            data.pop("api_key", None)
        data.setdefault("model", OPENAI_MODEL if provider == "openai" else "demo")
        return data

    def problems(self) -> Iterator[tuple[str, str]]:
        if self.provider == "openai":
            missing = self.missing_secret("api_key", 'for provider = "openai"')
            if missing:
                yield missing

    def timeouts(self) -> Timeouts:
        """The client's three bounds (:mod:`core.model.timeouts`)."""
        return Timeouts.given(
            connect=self.connect_timeout,
            first_byte=self.first_byte_timeout,
            idle=self.idle_timeout,
            legacy=self.timeout,
        )


class ProfileSection(Section):
    name: str = hidden_field("")
    model: Text | None = None
    """Default: ``[model] model``."""
    workspace: ConfigPath = UNSET
    """Default: ``<data_dir>/workspaces/<profile name>``."""
    system_prompt_file: ExistingFile | None = None
    max_iterations: PositiveInt = DEFAULT_MAX_ITERATIONS
    run_budget_seconds: PositiveNumber | None = None
    review_input_budget: PositiveInt | None = None
    tools: Texts | None = None
    approval_timeout: PositiveNumber = 300.0
    busy_policy: Annotated[BusyPolicy, Check(choice("queue", "interrupt", "steer"))] = "queue"
    queue_limit: PositiveInt = 20
    stop_clears_queue: Flag = True
    """Whether ``/stop`` also drops the messages queued behind the stopped turn."""
    debounce_ms: NonNegativeInt = 0
    """Text messages from one person this close together, while no turn runs, are one
    turn (docs/turn-loop.md §20); 0: off."""
    context_window: PositiveInt | None = None
    """Default: ``[model] context_window`` (filled in by the loader)."""
    compact_at: Share | None = None
    """Default: ``[model] compact_at`` (filled in by the loader)."""
    stream: Flag = True
    """Stream the answer (SSE): text shows as it comes and the idle timeout, not the
    whole generation, bounds a long answer. ``false`` for servers that cannot stream."""
    external_runtime: Texts | None = None
    vision: Flag = False
    """The profile's model accepts images: a photo is sent to it as an image, not a note."""
    workspace_scope: Annotated[WorkspaceScope, Check(choice("session", "profile"))] = "session"
    """``session``: a workspace per session under ``workspace``; ``profile``: one, shared."""
    sandbox: Annotated[SandboxKind, Check(choice("bwrap", "none"))] = "bwrap"
    """Where the terminal runs: ``bwrap`` (bubblewrap) or ``none`` (the host shell)."""
    sandbox_network: Flag = False
    """Whether sandboxed commands may use the network."""
    sandbox_processes: PositiveInt = limits.DEFAULT_PROCESSES
    """Processes and threads one conversation's commands may have at once."""
    sandbox_memory_mb: PositiveInt = limits.DEFAULT_MEMORY // limits.MiB
    """Address space of each sandboxed process, in MB (MiB)."""
    sandbox_cpu_seconds: PositiveInt = limits.DEFAULT_CPU_SECONDS
    """CPU seconds of each sandboxed process."""
    sandbox_file_size_mb: PositiveInt | None = None
    """Largest file a command may write, in MB. Default: the disk quota."""
    sandbox_disk_quota_mb: PositiveInt = limits.DEFAULT_DISK_QUOTA // limits.MiB
    """What one conversation's workspace may hold on disk, in MB."""
    mcp_servers: Texts | None = None
    """The ``[mcp.servers]`` whose tools this profile's agent gets. Default: all."""
    skills: Texts | None = None
    """The skills (``[skills]``) this profile's agent has. Default: all of them."""

    def problems(self) -> Iterator[tuple[str, str]]:
        if self.external_runtime == ():
            yield "external_runtime", "expected a command line (array of strings), got []"
        yield from self._sandbox_problems()

    def _sandbox_problems(self) -> Iterator[tuple[str, str]]:
        if (processes := self.sandbox_processes) < (least := limits.MIN_PROCESSES):
            why = "bubblewrap and the shell are processes too"
            yield "sandbox_processes", f"expected at least {least} ({why}), got {processes}"
        if (memory := self.sandbox_memory_mb) < (least := limits.MIN_MEMORY // limits.MiB):
            yield (
                "sandbox_memory_mb",
                f"expected at least {least} (no shell starts in less), got {memory}",
            )
        for key in SANDBOX_SIZES:
            value = getattr(self, key)
            if value is not None and value > SANDBOX_MAX:
                yield key, f"expected at most {SANDBOX_MAX} (1 PiB, or 34 years), got {value}"

    def sandbox_limits(self) -> limits.Limits:
        """The sandbox's view of the ``sandbox_*`` keys (:mod:`core.tools.limits`)."""
        file_size = self.sandbox_file_size_mb
        return limits.Limits(
            processes=self.sandbox_processes,
            memory=self.sandbox_memory_mb * limits.MiB,
            cpu_seconds=self.sandbox_cpu_seconds,
            file_size=None if file_size is None else file_size * limits.MiB,
            disk_quota=self.sandbox_disk_quota_mb * limits.MiB,
        )

    def workspace_problem(self, data_dir: Path) -> str | None:
        """The workspace may sit inside the data directory, never be it or contain it: the
        tools would see the database and the other sessions' files."""
        workspace, data = self.workspace.resolve(), data_dir.resolve()
        if data == workspace or data.is_relative_to(workspace):
            return f"must not be the data directory or contain it ({data})"
        return None

    def soul(self) -> str:
        """The text of the profile's SOUL.md (the built-in prompt when none is set)."""
        if self.system_prompt_file is None:
            return DEFAULT_SOUL
        return self.system_prompt_file.read_text(encoding="utf-8")

    def to_agent_profile(self) -> AgentProfile:
        """The engine's view of this profile; reads SOUL.md now (OSError if it vanished)."""
        assert self.model is not None
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
            workspace_scope=self.workspace_scope,
            approval_timeout=self.approval_timeout,
            busy_policy=self.busy_policy,
            queue_limit=self.queue_limit,
            stop_clears_queue=self.stop_clears_queue,
            debounce_ms=self.debounce_ms,
            stream=self.stream,
            context_window=self.context_window,
            compact_at=self.compact_at or DEFAULT_COMPACT_AT,
            external_runtime=self.external_runtime,
            vision=self.vision,
        )


class ModelPresetSection(Section):
    """``[models.<name>]``: a model a chat may switch to with ``/model NAME``
    (:mod:`gateway.turns.presets`). The API key is read from the env var ``api_key_env``
    names, never from the file."""

    name: str = hidden_field("")
    provider: Annotated[Provider, Check(choice("openai", "demo"))] = "openai"
    base_url: HttpUrl | None = None
    """Default: ``[model] base_url`` (filled in by the loader)."""
    model: Text
    """The model name the server is asked for."""
    api_key_env: Text | None = None
    """The env var holding the API key; unset: none sent (a local server)."""
    api_key: str | None = hidden_field(None, repr=False)
    """Read from ``api_key_env`` by the loader (never set in the file)."""
    vision: Flag = False
    """The model accepts images: a photo goes to it as an image, not a note."""
    stream: Flag = True
    """Ask for the answer as a stream (its text shows as it is written)."""
    owners_only: Flag = False
    """Only owners (the platform's owners and approvers, operators) may pick it."""
    # prices (gateway/control/usage): cost per million tokens, in one currency of your choice
    price_input_per_mtok: Price | None = None
    price_cached_input_per_mtok: Price | None = None
    """Default: ``price_input_per_mtok``."""
    price_output_per_mtok: Price | None = None

    def secrets(self) -> list[str]:
        return [self.api_key] if self.api_key else []


@dataclass(frozen=True, slots=True)
class Config:
    """The whole effective configuration; ``source`` is None for built-in defaults.

    ``sections`` holds every platform section present in the file, enabled or not;
    :meth:`platform` answers only the enabled ones.
    """

    source: Path | None
    gateway: GatewaySection
    model: ModelSection
    profiles: Mapping[str, ProfileSection]
    progress: ProgressSection = field(default_factory=ProgressSection)
    attachments: AttachmentsSection = field(default_factory=AttachmentsSection)
    transcription: TranscriptionSection = field(default_factory=TranscriptionSection)
    store: StoreSection = field(default_factory=StoreSection)
    cluster: ClusterSection = field(default_factory=ClusterSection)
    telemetry: TelemetrySection = field(default_factory=TelemetrySection)
    approvals: Mapping[str, frozenset[str]] = field(default_factory=dict)
    access: Mapping[str, frozenset[str]] = field(default_factory=dict)
    sections: Mapping[str, PlatformSection] = field(default_factory=dict)
    models: Mapping[str, ModelPresetSection] = field(default_factory=dict)
    """``[models.<name>]``: the presets ``/model`` offers, by name."""
    mcp: McpSection = field(default_factory=McpSection)
    """``[mcp]``: the MCP servers (:mod:`gateway.config.mcp`)."""
    memory: MemorySection = field(default_factory=MemorySection)
    """``[memory]`` (:mod:`gateway.config.memory`)."""
    schedule: ScheduleSection = field(default_factory=ScheduleSection)
    """``[schedule]``: scheduled turns (:mod:`gateway.config.schedule`)."""
    skills: SkillsSection = field(default_factory=SkillsSection)
    """``[skills]`` (:mod:`gateway.config.skills`)."""
    web_tools: WebToolsSection = field(default_factory=WebToolsSection)
    """``[web_tools]``: ``web_fetch`` and ``web_search`` (:mod:`gateway.config.web_tools`)."""
    quotas: QuotasSection = field(default_factory=QuotasSection)
    """``[quotas]``: spending caps per person and chat (:mod:`gateway.config.quotas`)."""

    @property
    def data_dir(self) -> Path:
        return self.gateway.data_dir

    def profile(self, name: str | None = None) -> ProfileSection:
        """The named profile (KeyError if unknown), or the default one."""
        return self.profiles[name or self.gateway.default_profile]

    def agent_profile(self, name: str | None = None) -> AgentProfile:
        """The engine's view of a profile, with ``[attachments] inline_bytes``."""
        profile = self.profile(name).to_agent_profile()
        return replace(profile, inline_bytes=self.attachments.inline_bytes)

    def platform(self, name: str) -> Any:
        """The platform's section when present and enabled, else None."""
        section = self.sections.get(name)
        return section if section is not None and section.enabled else None

    def enabled_platforms(self) -> list[str]:
        return [name for name, section in self.sections.items() if section.enabled]

    def approvers(self, platform: str) -> frozenset[str]:
        """User ids allowed to approve on ``platform``: ``[approvals]`` ∪ the section's."""
        section = self.platform(platform)
        own: frozenset[str] = section.approvers if section is not None else frozenset()
        return self.approvals.get(platform, frozenset()) | own

    def allowed_users(self, platform: str) -> frozenset[str]:
        """User ids allowed to talk on ``platform``: ``[access]`` ∪ the section's (and the
        users the platform implies, such as the web chat's own browser user)."""
        section = self.platform(platform)
        own: frozenset[str] = (
            section.allowed_users | section.implicit_users() if section is not None else frozenset()
        )
        return self.access.get(platform, frozenset()) | own

    def secrets(self) -> list[str]:
        """Every configured secret value (for masking in logs and chat)."""
        found = self.model.secrets() + self.transcription.secrets() + self.store.secrets()
        found += self.mcp.secrets()
        found += self.web_tools.secrets()
        for preset in self.models.values():
            found += preset.secrets()
        for section in self.sections.values():
            found += section.secrets()
        return found
