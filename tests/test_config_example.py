"""``config.example.toml`` documents exactly the keys the schema has, and ``check-config``
shows what it should."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from adapters.platforms import platforms
from gateway.config import load_config
from gateway.config.mcp import McpServerSection, McpToolSection
from gateway.config.memory import MemorySection
from gateway.config.quotas import QuotaLimits
from gateway.config.render import warnings
from gateway.config.schedule import ScheduleSection
from gateway.config.schema import (
    AttachmentsSection,
    ClusterSection,
    GatewaySection,
    ModelPresetSection,
    ModelSection,
    ProfileSection,
    ProgressSection,
    StoreSection,
    TelemetrySection,
    TranscriptionSection,
)
from gateway.config.skills import SkillsSection
from gateway.config.web_tools import WebToolsSection

EXAMPLE = Path(__file__).resolve().parent.parent / "config.example.toml"
HEADER = re.compile(r"^\[([a-z_.]+)\]\s*$")
KEY = re.compile(r"^#?\s?([a-z_]+)\s*=")


def documented_keys() -> dict[str, set[str]]:
    """Every key the example shows, set or commented out, per section."""
    sections: dict[str, set[str]] = {}
    current = ""
    for line in EXAMPLE.read_text(encoding="utf-8").splitlines():
        if header := HEADER.match(line):
            current = header.group(1)
            sections[current] = set()
        elif current and (key := KEY.match(line)):
            sections[current].add(key.group(1))
    return sections


def schema_keys() -> dict[str, set[str]]:
    keys = {
        "gateway": set(GatewaySection.listed_keys()),
        "model": set(ModelSection.listed_keys()),
        "profiles.default": set(ProfileSection.listed_keys()),
        "models.fast": set(ModelPresetSection.listed_keys()),
        "progress": set(ProgressSection.listed_keys()),
        "attachments": set(AttachmentsSection.listed_keys()),
        "transcription": set(TranscriptionSection.listed_keys()),
        "store": set(StoreSection.listed_keys()),
        "cluster": set(ClusterSection.listed_keys()),
        "telemetry": set(TelemetrySection.listed_keys()),
        "web_tools": set(WebToolsSection.listed_keys()),
        "quotas": {"timezone"},
        "quotas.person": set(QuotaLimits.listed_keys()),
        "quotas.chat": set(QuotaLimits.listed_keys()),
        "quotas.approvers": set(QuotaLimits.listed_keys()),
        "schedule": set(ScheduleSection.listed_keys()),
        "memory": set(MemorySection.listed_keys()),
        "skills": set(SkillsSection.listed_keys()),
        "mcp.servers.time": set(McpServerSection.listed_keys()),
        "mcp.servers.git": {"enabled", "command", "args", "directory"},
        "mcp.servers.git.tools.git_commit": set(McpToolSection.listed_keys()),
        "approvals": set(platforms()),
        "access": set(platforms()),
    }
    for name, platform in platforms().items():
        keys[name] = set(platform.section.listed_keys())
    return keys


def test_the_example_documents_every_key_of_the_schema_and_no_other() -> None:
    assert documented_keys() == schema_keys()


def test_check_config_shows_disabled_platform_sections(tmp_path: Path) -> None:
    config = load_config(EXAMPLE, env={"COMMONOS_HOME": str(tmp_path)})
    from gateway.config import render_config

    shown = render_config(config)
    disabled = set(platforms()) - set(config.enabled_platforms())
    assert disabled == {"telegram", "discord", "slack"}
    for name in disabled:
        assert f"[{name}]\nenabled = false" in shown


def test_an_enabled_platform_nobody_may_use_is_warned_about(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[telegram]\ntoken = "t"\n[discord]\ntoken = "d"\nallowed_users = [1]\n')
    (warning,) = warnings(load_config(path, env={}))
    assert warning.startswith("[telegram] is enabled but nobody may talk to the bot there")


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "gateway", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False)


def test_check_config_path_and_dash_dash_config_agree(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_text('[telegram]\ntoken = "t"\n')
    env = {"COMMONOS_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    positional = run_cli("check-config", str(path), env=env)
    option = run_cli("check-config", "--config", str(path), env=env)
    assert positional.returncode == option.returncode == 0
    assert positional.stdout == option.stdout and str(path) in option.stdout
    assert "[telegram] is enabled but nobody may talk" in option.stderr
    both = run_cli("check-config", "--config", str(path), str(tmp_path / "b.toml"), env=env)
    assert both.returncode == 2 and "give the config file once" in both.stderr
