"""Loading ``config.toml`` into a validated :class:`~gateway.config_schema.Config`.

Where the file comes from: ``--config PATH``, else ``$COMMONOS_HOME/config.toml`` when it
exists (``COMMONOS_HOME`` defaults to ``~/.commonos``), else built-in defaults. Secrets may
come from env vars (``COMMONOS_MODEL_API_KEY``, ``COMMONOS_TELEGRAM_TOKEN``, ...), which
win over the file. Every problem is collected and raised at once as :class:`ConfigError`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gateway import config_sections as sections
from gateway.config_reader import ErrorLog, Table
from gateway.config_schema import (
    Config,
    GatewaySection,
    ModelSection,
    PlatformSection,
    ProfileSection,
    WebSection,
)
from gateway.config_sections import Context

__all__ = [
    "Config",
    "ConfigError",
    "ProfileSection",
    "find_config_file",
    "home_dir",
    "load_config",
    "parse_config",
]

CONFIG_FILENAME = "config.toml"
DEFAULTS_SOURCE = "<built-in defaults>"


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
    log = ErrorLog(str(source) if source is not None else DEFAULTS_SOURCE)
    root = Table(data, "", log)
    base_dir = source.parent.resolve() if source is not None else Path.cwd()
    config = _build(root, source, Context(base_dir, env), home_dir(env))
    root.finish()
    if log.errors:
        raise ConfigError(log.errors)
    return config


def _build(root: Table, source: Path | None, ctx: Context, home: Path) -> Config:
    gateway = sections.read_gateway(root.child("gateway"), ctx, home)
    model = sections.read_model(root.child("model"), ctx)
    return Config(
        source=source,
        gateway=gateway,
        model=model,
        profiles=_profiles(root, ctx, gateway, model),
        progress=sections.read_progress(root.child("progress")),
        approvals=sections.read_user_lists(root.child("approvals")),
        access=sections.read_user_lists(root.child("access")),
        telegram=_platform(root, "telegram", ctx),
        discord=_platform(root, "discord", ctx),
        slack=_platform(root, "slack", ctx),
        web=_web(root, ctx),
    )


def _profiles(
    root: Table, ctx: Context, gateway: GatewaySection, model: ModelSection
) -> dict[str, ProfileSection]:
    defaults = ProfileSection(name="", model=model.model, workspace=gateway.data_dir / "workspaces")
    tables = root.child("profiles").children() or {
        "default": Table({}, "profiles.default", root.log)
    }
    profiles = {
        name: sections.read_profile(table, name, ctx, defaults, data_dir=gateway.data_dir)
        for name, table in tables.items()
    }
    if gateway.default_profile not in profiles:
        _unknown_default_profile(root, gateway.default_profile, sorted(profiles))
    return profiles


def _unknown_default_profile(root: Table, name: str, defined: list[str]) -> None:
    root.log.add(
        "gateway.default_profile",
        f'unknown profile "{name}"; defined profiles: {", ".join(defined)}',
    )


PlatformReader = Callable[[Table, Context, bool], PlatformSection]
PLATFORM_READERS: dict[str, PlatformReader] = {
    "telegram": sections.read_telegram,
    "discord": sections.read_discord,
    "slack": sections.read_slack,
}


def _platform(root: Table, name: str, ctx: Context) -> Any:
    """The platform's section, or None when absent or ``enabled = false``."""
    if not root.has(name):
        return _absent(root, name)
    table = root.child(name)
    enabled = table.boolean("enabled", True)
    section = PLATFORM_READERS[name](table, ctx, enabled)
    return section if enabled else None


def _web(root: Table, ctx: Context) -> WebSection | None:
    """The web chat is on by default (loopback only); ``enabled = false`` turns it off."""
    table = root.child("web")
    enabled = table.boolean("enabled", True)
    section = sections.read_web(table, ctx)
    return section if enabled else None


def _absent(root: Table, name: str) -> Any:
    root.raw(name)  # a known section name, for "did you mean" on typos
    return None
