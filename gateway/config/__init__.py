"""Loading ``config.toml`` into a validated :class:`Config`.

Where the file comes from: ``--config PATH``, else ``$COMMONOS_HOME/config.toml`` when it
exists (``COMMONOS_HOME`` defaults to ``~/.commonos``), else built-in defaults. Secrets may
come from env vars (``COMMONOS_MODEL_API_KEY``, ``COMMONOS_TELEGRAM_TOKEN``, ...; each
secret field names its own), which win over the file.

Each section reads its own table (a frozen dataclass that takes no unknown key,
:mod:`adapters.config_reader`); this module gathers their problems into one line each —
``<file>: <key path>: <what was expected>`` with "did you mean" for unknown keys — and
raises them all at once as :class:`ConfigError`.
"""

from __future__ import annotations

import functools
import json
import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from adapters.config import NAME, ApproverIds, Section, UserIds
from adapters.config_reader import Issue, ReadContext, TableInvalid, got, unknown_key
from adapters.platforms import platforms
from gateway.config.mcp import McpSection, profile_problems
from gateway.config.memory import MemorySection
from gateway.config.quotas import QuotasSection
from gateway.config.render import mask, render_config
from gateway.config.schedule import ScheduleSection
from gateway.config.schema import (
    UNSET,
    Config,
    GatewaySection,
    ModelPresetSection,
    ModelSection,
    ProfileSection,
)
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

__all__ = [
    "Config",
    "ConfigError",
    "ModelSection",
    "ProfileSection",
    "find_config_file",
    "home_dir",
    "load_config",
    "mask",
    "parse_config",
    "render_config",
]

CONFIG_FILENAME = "config.toml"
DEFAULTS_SOURCE = "<built-in defaults>"
CORE: dict[str, type[Section]] = {
    "gateway": GatewaySection,
    "model": ModelSection,
    "progress": ProgressSection,
    "attachments": AttachmentsSection,
    "transcription": TranscriptionSection,
    "store": StoreSection,
    "cluster": ClusterSection,
    "telemetry": TelemetrySection,
    "mcp": McpSection,
    "memory": MemorySection,
    "schedule": ScheduleSection,
    "skills": SkillsSection,
    "web_tools": WebToolsSection,
    "quotas": QuotasSection,
}
USER_LISTS = ("approvals", "access")
Problem = tuple[str, str]
"""``(key path, message)``."""


class ConfigError(Exception):
    """The configuration is unusable; ``errors`` holds one readable line per problem.

    Each line names the file, the key path and what was expected, e.g.
    ``config.toml: profiles.default.max_iterations: expected a positive integer, got -3``.
    """

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


def home_dir(env: Mapping[str, str]) -> Path:
    """``$COMMONOS_HOME``, or ``~/.commonos``."""
    home = env.get("COMMONOS_HOME")
    return Path(home).expanduser().resolve() if home else Path.home() / ".commonos"


def find_config_file(explicit: Path | None, env: Mapping[str, str]) -> Path | None:
    """The config file to load, or None for built-in defaults."""
    if explicit is not None:
        return explicit
    candidate = home_dir(env) / CONFIG_FILENAME
    return candidate if candidate.is_file() else None


def load_config(path: Path | None = None, *, env: Mapping[str, str] | None = None) -> Config:
    """Find, read and validate the configuration; raises :class:`ConfigError`."""
    env = os.environ if env is None else env
    source = find_config_file(path, env)
    if source is None:
        return parse_config({}, None, env)
    return parse_config(_read_toml(source), source, env)


def _read_toml(path: Path) -> dict[str, object]:
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except FileNotFoundError:
        raise ConfigError([f"{path}: config file not found"]) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: not valid UTF-8 text ({exc.reason})"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"{path}: invalid TOML: {exc}"]) from None


def parse_config(data: Mapping[str, object], source: Path | None, env: Mapping[str, str]) -> Config:
    """Validate parsed TOML ``data`` (as read from ``source``); raises :class:`ConfigError`."""
    reader = _Reader(source, env)
    config = reader.config(data)
    if reader.problems:
        where = str(source) if source is not None else DEFAULTS_SOURCE
        raise ConfigError([f"{where}: {path}: {message}" for path, message in reader.problems])
    assert config is not None
    return config


class _Reader:
    """One pass over a file's tables, collecting every problem."""

    def __init__(self, source: Path | None, env: Mapping[str, str]) -> None:
        base_dir = source.parent.resolve() if source is not None else Path.cwd()
        self.context = ReadContext(base_dir, env)
        self.env = env
        self.home = home_dir(env)
        self.source = source
        self.problems: list[Problem] = []

    def config(self, data: Mapping[str, object]) -> Config | None:
        known = platforms()
        core = {name: self.section(name, kind, data.get(name, {})) for name, kind in CORE.items()}
        profiles = self.profiles(data.get("profiles", {}))
        models = self.models(data.get("models", {}))
        lists = {
            name: self.section(name, _user_lists(name, tuple(known)), data.get(name, {}))
            for name in USER_LISTS
        }
        sections = {
            name: self.section(name, platform.section, data.get(name, {}))
            for name, platform in known.items()
            if name in data or platform.on_by_default
        }
        self.unknown("", data, [*CORE, "profiles", "models", *USER_LISTS, *known])
        if self.problems:
            return None
        gateway = core["gateway"]
        assert isinstance(gateway, GatewaySection) and isinstance(core["model"], ModelSection)
        if gateway.data_dir == UNSET:
            gateway = replace(gateway, data_dir=self.home)
        profiles = {
            name: _with_defaults(profile, core["model"], gateway)
            for name, profile in (profiles or {"default": ProfileSection(name="default")}).items()
        }
        for name, profile in profiles.items():
            if problem := profile.workspace_problem(gateway.data_dir):
                self.problems.append((f"{_join('profiles', name)}.workspace", problem))
        servers = {name: profile.mcp_servers for name, profile in profiles.items()}
        self.problems += profile_problems(servers, core["mcp"])
        if gateway.default_profile not in profiles:
            defined = ", ".join(sorted(profiles))
            self.problems.append(
                (
                    "gateway.default_profile",
                    f'unknown profile "{gateway.default_profile}"; defined profiles: {defined}',
                )
            )
        return Config(
            source=self.source,
            gateway=gateway,
            model=core["model"],
            profiles=profiles,
            progress=core["progress"],
            attachments=core["attachments"],
            transcription=core["transcription"],
            store=core["store"],
            cluster=core["cluster"],
            telemetry=core["telemetry"],
            approvals=_by_platform(lists["approvals"]),
            access=_by_platform(lists["access"]),
            sections=sections,
            models={n: _preset_defaults(m, core["model"]) for n, m in models.items()},
            mcp=core["mcp"],
            memory=core["memory"],
            schedule=core["schedule"],
            skills=core["skills"],
            web_tools=core["web_tools"],
            quotas=core["quotas"],
        )

    # one table ----------------------------------------------------------------------
    def section(self, path: str, kind: type[Section], raw: object) -> Any:
        """The validated section (its defaults where it failed), every problem recorded in
        the order of the section's keys."""
        if not isinstance(raw, dict):
            self.problems.append((path, f"expected a table, {got(raw)}"))
            return kind.fallback()
        data = self.with_env(kind, path, raw)
        found: list[Problem] = []
        section: Section | None
        try:
            section = kind.read(data, self.context)
        except TableInvalid as exc:
            found += _problems(exc.issues, path)
            section = self.valid_part(kind, data, exc.issues)
        if section is not None and getattr(section, "enabled", True):
            found += [(_join(path, key), message) for key, message in section.problems()]
        order = {key: index for index, key in enumerate(kind.listed_keys())}
        self.problems += sorted(found, key=lambda p: order.get(_first_key(p[0], path), len(order)))
        return section if section is not None else kind.fallback()

    def valid_part(
        self, kind: type[Section], data: dict[str, Any], issues: list[Issue]
    ) -> Section | None:
        """The section without the keys that failed, so that rules between the other keys
        are still checked (and reported with the rest)."""
        bad = {issue.loc[0] for issue in issues if issue.loc}
        try:
            return kind.read({k: v for k, v in data.items() if k not in bad}, self.context)
        except TableInvalid:
            return None

    def with_env(self, kind: type[Section], path: str, raw: dict[str, Any]) -> dict[str, Any]:
        """``raw`` with each secret set from its env var, which wins over the file."""
        merged = dict(raw)
        for key, env_var in kind.secret_env().items():
            if self.env.get(env_var):
                merged[key] = self.env[env_var]
        return merged

    def profiles(self, raw: object) -> dict[str, ProfileSection]:
        if not isinstance(raw, dict):
            self.problems.append(("profiles", f"expected a table, {got(raw)}"))
            return {}
        found = {}
        for name, table in raw.items():
            path = _join("profiles", name)
            if not NAME.match(name):
                self.problems.append((path, "expected a name of letters, digits, '_' or '-'"))
            profile = self.section(path, ProfileSection, table)
            found[name] = replace(profile, name=name)
        return found

    def models(self, raw: object) -> dict[str, ModelPresetSection]:
        """``[models.<name>]``: each preset, its API key read from its ``api_key_env``."""
        if not isinstance(raw, dict):
            self.problems.append(("models", f"expected a table, {got(raw)}"))
            return {}
        found = {}
        for name, table in raw.items():
            path = _join("models", name)
            if not NAME.match(name) or name == "default":
                why = '"default" is the profile\'s own model' if name == "default" else ""
                self.problems.append(
                    (path, why or "expected a name of letters, digits, '_' or '-'")
                )
            if isinstance(table, dict) and "api_key" in table:
                self.problems.append(
                    (f"{path}.api_key", "set api_key_env: the name of the env var holding the key")
                )
                table = {k: v for k, v in table.items() if k != "api_key"}
            preset = self.section(path, ModelPresetSection, table)
            found[name] = self.preset_key(path, replace(preset, name=name))
        return found

    def preset_key(self, path: str, preset: ModelPresetSection) -> ModelPresetSection:
        env_var = preset.api_key_env
        if env_var is None:
            return preset
        if not self.env.get(env_var):
            self.problems.append((f"{path}.api_key_env", f"the env var {env_var} is not set"))
            return preset
        return replace(preset, api_key=self.env[env_var])

    def unknown(self, path: str, raw: Mapping[str, object], known: list[str]) -> None:
        for key, value in raw.items():
            if key not in known:
                self.problems.append((_join(path, key), unknown_key(key, value, known)))


@functools.cache
def _user_lists(name: str, platforms: tuple[str, ...]) -> type[Section]:
    """``[approvals]`` / ``[access]``: an array of user ids per platform; ``"*"`` (everyone)
    may open access, never approvals."""
    ids: Any = ApproverIds if name == "approvals" else UserIds
    namespace: dict[str, Any] = {platform: frozenset() for platform in platforms}
    namespace["__annotations__"] = {platform: ids for platform in platforms}
    return type(name.title(), (Section,), namespace)


def _by_platform(lists: Section) -> dict[str, frozenset[str]]:
    """The platforms ``[approvals]`` or ``[access]`` names a user for, with their ids."""
    return {name: ids for name in lists.listed_keys() if (ids := getattr(lists, name))}


def _with_defaults(
    profile: ProfileSection, model: ModelSection, gateway: GatewaySection
) -> ProfileSection:
    workspace = profile.workspace
    if workspace == UNSET:
        workspace = gateway.data_dir / "workspaces" / profile.name
    return replace(
        profile,
        model=profile.model or model.model,
        workspace=workspace,
        context_window=profile.context_window or model.context_window,
        compact_at=profile.compact_at or model.compact_at,
    )


def _preset_defaults(preset: ModelPresetSection, model: ModelSection) -> ModelPresetSection:
    """A preset's ``base_url`` defaults to ``[model]``'s."""
    return replace(preset, base_url=preset.base_url or model.base_url)


def _problems(issues: list[Issue], path: str) -> Iterator[Problem]:
    for issue in issues:
        where = path
        for part in issue.loc:
            where = f"{where}[{part}]" if isinstance(part, int) else _join(where, str(part))
        yield where, issue.message


def _first_key(where: str, path: str) -> str:
    """The section key a problem at ``where`` (under ``path``) is about."""
    rest = where[len(path) + 1 :] if where.startswith(path + ".") else where
    return rest.split(".", 1)[0].split("[", 1)[0]


def _join(path: str, key: str) -> str:
    part = (
        key if all(NAME.match(k) for k in key.split(".")) else json.dumps(key, ensure_ascii=False)
    )
    return f"{path}.{part}" if path else part
