"""Start-up containment: the process is made non-dumpable, each profile's sandbox is
chosen as configured, and a workspace that would expose the data directory is refused."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import pytest

from core.tools.sandbox import Bubblewrap, NoSandbox, Unavailable
from gateway.config import ConfigError, load_config
from gateway.turns.containment import hidden_paths, prepare_sandboxes

CHECK_DUMPABLE = (
    "import ctypes; from gateway.turns.containment import protect_process; "
    "before = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0); ok = protect_process(); "
    "print(before, ok, ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"
)


async def test_the_gateway_process_makes_itself_non_dumpable() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHECK_DUMPABLE, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    assert out.decode().split() == ["1", "True", "0"]


def config_with(tmp_path: Path, profile: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[gateway]\ndata_dir = "data"\n\n[profiles.default]\n{profile}\n')
    return path


async def test_sandbox_none_is_honoured_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = load_config(config_with(tmp_path, 'sandbox = "none"'), env={})
    with caplog.at_level(logging.WARNING, logger="gateway.turns.containment"):
        sandboxes = await prepare_sandboxes(config)
    assert sandboxes == {"default": NoSandbox()}
    assert any(
        'sandbox = "none"' in r.message and "unsandboxed" in r.message for r in caplog.records
    )


async def test_bwrap_is_the_default_and_hides_the_data_dir_and_the_config(tmp_path: Path) -> None:
    source = config_with(tmp_path, "sandbox_network = true")
    config = load_config(source, env={})
    sandbox = (await prepare_sandboxes(config))["default"]
    assert isinstance(sandbox, Bubblewrap) and sandbox.network
    assert sandbox.hidden == hidden_paths(config) == ((tmp_path / "data").resolve(), source)


async def test_a_missing_bwrap_leaves_the_profile_without_a_sandbox(tmp_path: Path) -> None:
    config = load_config(config_with(tmp_path, ""), env={})
    sandboxes = await prepare_sandboxes(config, executable="no-such-bwrap")
    assert isinstance(sandboxes["default"], Unavailable)


@pytest.mark.parametrize("workspace", ['"data"', '"."', f'"{Path("/").as_posix()}"'])
def test_a_workspace_that_is_or_holds_the_data_dir_is_a_config_error(
    tmp_path: Path, workspace: str
) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(config_with(tmp_path, f"workspace = {workspace}"), env={})
    assert "profiles.default.workspace: must not be the data directory or contain it" in str(
        error.value
    )


def test_the_default_workspaces_are_per_profile_inside_the_data_dir(tmp_path: Path) -> None:
    config = load_config(config_with(tmp_path, 'workspace_scope = "profile"'), env={})
    profile = config.profile()
    assert profile.workspace == (tmp_path / "data" / "workspaces" / "default").resolve()
    assert profile.workspace_scope == "profile" and profile.sandbox == "bwrap"
