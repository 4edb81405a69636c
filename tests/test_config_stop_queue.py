"""``[profiles.<name>] stop_clears_queue``: on by default, and turned off per profile."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import ConfigError, load_config

BASE = '[model]\nprovider = "demo"\n'


def profile_of(tmp_path: Path, text: str) -> bool:
    path = tmp_path / "config.toml"
    path.write_text(BASE + text)
    return load_config(path, env={}).agent_profile().stop_clears_queue


def test_stop_clears_the_queue_by_default(tmp_path: Path) -> None:
    assert profile_of(tmp_path, "") is True


def test_a_profile_can_keep_the_queue_on_stop(tmp_path: Path) -> None:
    assert profile_of(tmp_path, "[profiles.default]\nstop_clears_queue = false\n") is False


def test_a_setting_that_is_not_a_boolean_is_one_readable_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        profile_of(tmp_path, '[profiles.default]\nstop_clears_queue = "sometimes"\n')
    assert "stop_clears_queue" in str(error.value)
