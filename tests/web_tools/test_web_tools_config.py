"""``[web_tools]``: the tools exist only where a profile names them; the search key is a
secret; a provider without its URL or key is a config problem."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.config import ConfigError, parse_config
from gateway.wiring import _tools


def config(tmp_path: Path, data: dict[str, Any], env: dict[str, str] | None = None) -> Any:
    base = {"gateway": {"data_dir": str(tmp_path)}}
    return parse_config({**base, **data}, None, env or {})


def test_web_tools_are_only_in_profiles_that_name_them(tmp_path: Path) -> None:
    loaded = config(
        tmp_path,
        {
            "web_tools": {"search_provider": "searxng", "search_url": "http://127.0.0.1:8888"},
            "profiles": {
                "default": {"sandbox": "none"},
                "reader": {"sandbox": "none", "tools": ["read_file", "web_fetch", "web_search"]},
                "fetcher": {"sandbox": "none", "tools": ["web_fetch"]},
            },
        },
    )
    registries = _tools(loaded, {})
    assert "web_fetch" not in registries["default"].names()
    assert {"web_fetch", "web_search"} <= set(registries["reader"].names())
    assert "web_search" not in registries["fetcher"].names()


def test_no_search_provider_means_no_web_search(tmp_path: Path) -> None:
    loaded = config(tmp_path, {"profiles": {"default": {"tools": ["web_search", "web_fetch"]}}})
    names = _tools(loaded, {})["default"].names()
    assert "web_fetch" in names and "web_search" not in names


def test_the_search_api_key_is_a_secret_read_from_its_env_var(tmp_path: Path) -> None:
    loaded = config(
        tmp_path,
        {"web_tools": {"search_provider": "brave"}},
        env={"COMMONOS_SEARCH_API_KEY": "BSA-secret-123"},
    )
    assert loaded.web_tools.search_api_key == "BSA-secret-123"
    assert "BSA-secret-123" in loaded.secrets()


@pytest.mark.parametrize(
    ("section", "problem"),
    [
        ({"search_provider": "searxng"}, "web_tools.search_url: expected the SearXNG URL"),
        ({"search_provider": "brave"}, "web_tools.search_api_key: missing secret"),
    ],
)
def test_a_provider_without_what_it_needs_is_a_problem(
    tmp_path: Path, section: dict[str, str], problem: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        config(tmp_path, {"web_tools": section})
    assert any(problem in line for line in raised.value.errors), raised.value.errors


def test_no_profile_naming_a_web_tool_imports_nothing_of_core_web(tmp_path: Path) -> None:
    script = (
        "import sys; from pathlib import Path; from gateway.config import parse_config;"
        "from gateway.wiring import _tools;"
        f"c = parse_config({{'gateway': {{'data_dir': {str(tmp_path)!r}}}}}, None, {{}});"
        "_tools(c, {});"
        "print(sorted(m for m in sys.modules if m.startswith('core.web') or m == 'trafilatura'))"
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]"
