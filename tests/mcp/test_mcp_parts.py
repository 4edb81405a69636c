"""MCP's small rules: registry names, name clashes, the config section, and the cost of
the feature when it is off."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.mcp.names import MAX_NAME, tool_name
from gateway.config import ConfigError, parse_config


def test_a_tool_name_is_safe_and_capped_and_long_names_stay_apart() -> None:
    assert tool_name("git", "git_status") == "mcp__git__git_status"
    assert tool_name("my.server", "do it!") == "mcp__my_server__do_it_"
    one, two = tool_name("s", "x" * 80 + "a"), tool_name("s", "x" * 80 + "b")
    assert len(one) == len(two) == MAX_NAME and one != two


def test_the_section_expands_variables_and_names_a_missing_one(tmp_path: Path) -> None:
    data = {
        "mcp": {"servers": {"notes": {
            "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${NOTES}"},
        }}},
    }  # fmt: skip
    env = {"COMMONOS_HOME": str(tmp_path), "NOTES": "s3cr3t-token"}
    config = parse_config(data, None, env)
    assert "Bearer s3cr3t-token" in config.secrets()
    with pytest.raises(ConfigError) as missing:
        parse_config(data, None, {"COMMONOS_HOME": str(tmp_path)})
    assert "mcp.servers.notes.headers.Authorization: the env var NOTES is not set" in str(
        missing.value
    )


def test_a_server_is_stdio_or_http_and_profiles_name_known_servers(tmp_path: Path) -> None:
    data = {
        "mcp": {"servers": {"both": {"command": "x", "url": "http://h/mcp"}}},
        "profiles": {"default": {"mcp_servers": ["nope"]}},
    }
    with pytest.raises(ConfigError) as problems:
        parse_config(data, None, {"COMMONOS_HOME": str(tmp_path)})
    assert "mcp.servers.both.command: set command (a stdio server) or url" in str(problems.value)


def test_with_no_mcp_section_nothing_of_mcp_is_imported() -> None:
    code = (
        "import sys, gateway.app, gateway.wiring, gateway.cli.main\n"
        "from gateway.config import parse_config\n"
        "parse_config({}, None, {'COMMONOS_HOME': '/tmp/x'})\n"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'core.mcp'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
