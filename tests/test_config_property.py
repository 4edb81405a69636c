"""Any TOML-shaped table gives a :class:`Config` or a :class:`ConfigError` of readable
lines, never another exception (adapters/config_reader.py; "bad input gets a clear error").

The tables are drawn over the real section and key names (so most of them reach a value
check) with values of every TOML kind: text with odd unicode, NUL bytes and newlines,
non-finite numbers, arrays and tables."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.config import Section
from adapters.platforms import platforms
from gateway.config import CORE, ConfigError, parse_config
from gateway.config.mcp import McpServerSection
from gateway.config.schema import ModelPresetSection, ProfileSection

SECTIONS: dict[str, type[Section]] = {
    **CORE,
    **{name: platform.section for name, platform in platforms().items()},
}
TEXT = st.text(st.sampled_from("aZ0_-. é\u202e\x00\n${}/:*🙂"), max_size=8) | st.sampled_from(
    ["", " ", "a\x00b", "\u202e", "${HOME}", "${UNSET_VAR}", "https://x", "*", "..", "UTC"]
)
SCALARS = (
    TEXT
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.booleans()
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=4,
)


def table(kind: type[Section]) -> st.SearchStrategy[dict[str, object]]:
    """A table of ``kind``'s own keys (and stray ones), with values of any kind."""
    return st.dictionaries(st.sampled_from(kind.listed_keys()) | TEXT, VALUES, max_size=4)


def named(kind: type[Section]) -> st.SearchStrategy[dict[str, object]]:
    names = st.sampled_from(["default", "a", "x y", "b\n"]) | TEXT
    return st.dictionaries(names, table(kind) | VALUES, max_size=2)


SECTION = st.sampled_from(sorted(SECTIONS)).flatmap(
    lambda name: st.tuples(st.just(name), table(SECTIONS[name]) | VALUES)
)
NESTED = st.fixed_dictionaries(
    {},
    optional={
        "profiles": named(ProfileSection),
        "models": named(ModelPresetSection),
        "mcp": st.fixed_dictionaries({"servers": named(McpServerSection)}),
        "access": st.dictionaries(st.sampled_from(sorted(platforms())) | TEXT, VALUES),
        "approvals": st.dictionaries(st.sampled_from(sorted(platforms())) | TEXT, VALUES),
    },
)
CONFIGS = st.tuples(st.lists(SECTION, max_size=3), NESTED).map(
    lambda drawn: {**dict(drawn[0]), **drawn[1]}
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=CONFIGS)
def test_any_table_gives_a_config_or_readable_errors(data: dict[str, object]) -> None:
    source = Path("/nonexistent/config.toml")
    try:
        config = parse_config(data, source, {})
    except ConfigError as exc:
        assert exc.errors, "a ConfigError names its problems"
        for line in exc.errors:
            assert line.startswith(f"{source}: ") and "\n" not in line[len(str(source)) :]
    else:
        assert config.profile().model
        assert math.isfinite(config.model.slow_notice_seconds)


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"gateway": {"data_dir": "a\x00b"}}, "gateway.data_dir"),
        ({"profiles": {"a": {"workspace": "w\x00"}}}, "profiles.a.workspace"),
        ({"profiles": {"a": {"system_prompt_file": "s\x00"}}}, "profiles.a.system_prompt_file"),
        ({"skills": {"dirs": ["d\x00"]}}, "skills.dirs"),
        ({"mcp": {"servers": {"x": {"command": "c", "directory": "\x00"}}}}, "mcp.servers.x"),
        ({"models": {"fast": []}}, "models.fast"),
        ({"gateway": {"0\n": 1}}, 'gateway."0\\n"'),
    ],
)
def test_a_nul_byte_a_stray_newline_or_a_wrong_table_is_one_line_about_its_key(
    data: dict[str, object], key: str
) -> None:
    with pytest.raises(ConfigError) as failed:
        parse_config(data, Path("/nonexistent/config.toml"), {})
    assert any(line.startswith(f"/nonexistent/config.toml: {key}") for line in failed.value.errors)
    assert all("\n" not in line for line in failed.value.errors)
