"""The effective configuration as TOML text, secrets masked (``commonos check-config``).

A secret is never printed in full: long ones keep two characters at each end
(``"12…ef"``), short ones become ``"***"``. Header values whose name suggests a
credential (``Authorization``, ``api-key``, ...) are masked the same way. Platform
sections are shown whether enabled or not, so a reader sees what is switched off.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from adapters.config import NAME, Section
from gateway.config.schema import Config
from gateway.config.sections import mask_url

_SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie|session", re.IGNORECASE)
_MIN_REVEALING_LENGTH = 16


def mask(secret: str) -> str:
    """A recognisable but useless rendering of a secret."""
    if len(secret) >= _MIN_REVEALING_LENGTH:
        return f"{secret[:2]}…{secret[-2:]}"
    return "***"


def render_config(config: Config) -> str:
    """The whole effective configuration, one TOML table per section."""
    lines = [_origin(config)]
    for name, section in _sections(config):
        lines += ["", f"[{name}]", *_entries(section)]
        if name == "gateway":
            lines.append(f"# database: {_database(config)}")
    return "\n".join(lines) + "\n"


def _database(config: Config) -> str:
    """The SQLite file, or the PostgreSQL URL with its password masked."""
    url = config.store.url
    return f"PostgreSQL {mask_url(url)!s}" if url else str(config.gateway.db_path)


def warnings(config: Config) -> list[str]:
    """What is valid but probably not meant: an enabled platform nobody may talk on."""
    return [
        f"[{name}] is enabled but nobody may talk to the bot there: add user ids to "
        f'allowed_users (or [access] {name}; "*" for everyone)'
        for name in config.enabled_platforms()
        if not config.allowed_users(name) and not config.approvers(name)
    ]


def _origin(config: Config) -> str:
    if config.source is None:
        return "# effective configuration: built-in defaults (no config file found)"
    return f"# effective configuration, loaded from {config.source}"


def _sections(config: Config) -> Iterator[tuple[str, object]]:
    yield "gateway", config.gateway
    yield "model", config.model
    for name, profile in config.profiles.items():
        yield f"profiles.{_key(name)}", profile
    yield "progress", config.progress
    yield "attachments", config.attachments
    yield "transcription", config.transcription
    yield "store", config.store
    yield "cluster", config.cluster
    yield "telemetry", config.telemetry
    for name, server in config.mcp.servers.items():
        yield f"mcp.servers.{_key(name)}", server.shown(mask)
    yield "approvals", config.approvals
    yield "access", config.access
    yield from config.sections.items()


def _entries(section: object) -> Iterator[str]:
    if isinstance(section, Mapping):
        for key, value in section.items():
            yield f"{_key(key)} = {_value(value)}"
        return
    assert isinstance(section, Section)
    secrets = section.secret_env()
    for name in section.listed_keys():
        yield _entry(name, getattr(section, name), name in secrets)


def _entry(name: str, value: object, secret: bool) -> str:
    if value is None or (secret and value == ""):
        return f"# {name} is not set"
    if secret and isinstance(value, str):
        shown = str(mask_url(value)) if name == "url" else mask(value)
        return f"{name} = {_value(shown)}"
    if name == "headers" and isinstance(value, Mapping):
        return f"{name} = {_value(_masked_headers(value))}"
    return f"{name} = {_value(value)}"


def _masked_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: mask(v) if _SECRET_HEADER.search(k) else v for k, v in headers.items()}


def _key(key: str) -> str:
    return key if NAME.match(key) else json.dumps(key, ensure_ascii=False)


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value), ensure_ascii=False)
    if isinstance(value, frozenset):
        return _value(tuple(sorted(value)))
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        pairs = ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items())
        return "{ " + pairs + " }" if pairs else "{}"
    return json.dumps(str(value))
