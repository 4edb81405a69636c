"""``[quotas]`` parsed from a filled-in table (and one readable error per bad value), and
the ``/metrics`` usage counters: labelled by profile and model only — never a person or a
chat (README "Usage and quotas")."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from core.types import Usage
from gateway.config import ConfigError, load_config
from gateway.control.usage.metrics import UsageCounters

FILLED = """
[quotas]
timezone = "Europe/Berlin"
[quotas.person]
daily_tokens = 200000
monthly_cost = 12.5
[quotas.chat]
monthly_tokens = 5000000
[quotas.approvers]
daily_cost = 3
"""


def test_a_filled_in_quotas_table(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(FILLED)
    quotas = load_config(path).quotas
    assert quotas.enabled and quotas.zone().key == "Europe/Berlin"
    assert (quotas.person.daily_tokens, quotas.person.monthly_cost) == (200_000, 12.5)
    assert quotas.person.monthly_tokens is None and quotas.chat.monthly_tokens == 5_000_000
    assert quotas.approvers is not None and quotas.approvers.daily_cost == 3.0


@pytest.mark.parametrize(
    ("table", "wanted"),
    [
        ('timezone = "Mars/Olympus"', "unknown time zone 'Mars/Olympus'"),
        ("[quotas.person]\ndaily_tokens = -5", "quotas.person.daily_tokens"),
        ('[quotas.chat]\nmonthly_cost = "lots"', "quotas.chat.monthly_cost"),
        ("[quotas.person]\nweekly_tokens = 10", "quotas.person.weekly_tokens"),
    ],
)
def test_bad_quota_values_are_readable_errors(tmp_path: Path, table: str, wanted: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[quotas]\n{table}\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert any(wanted in error for error in raised.value.errors), raised.value.errors


def test_usage_counters_are_labelled_by_profile_and_model_only() -> None:
    registry = CollectorRegistry()
    counters = UsageCounters(registry)
    counters.count("default", "cheap", Usage(1000, 20, cached_tokens=600), 0.25)
    counters.count("default", "cheap", Usage(500, 5, estimated=True), None)
    counters.count("coder", "smart", Usage(70, 7), 1.0)
    text = generate_latest(registry).decode()
    lines = [line for line in text.splitlines() if line.startswith("commonos_model_")]
    cheap = 'model="cheap",profile="default"'
    assert f'commonos_model_tokens_total{{kind="prompt",{cheap}}} 1500.0' in lines
    assert f'commonos_model_tokens_total{{kind="cached",{cheap}}} 600.0' in lines
    assert f'commonos_model_calls_total{{estimated="true",{cheap}}} 1.0' in lines
    assert f"commonos_model_cost_total{{{cheap}}} 0.25" in lines
    assert 'commonos_model_cost_total{model="smart",profile="coder"} 1.0' in lines
    labels = {pair.split("=")[0] for line in lines if "{" in line
              for pair in line[line.index("{") + 1 : line.index("}")].split(",")}  # fmt: skip
    assert labels == {"profile", "model", "kind", "estimated"}
