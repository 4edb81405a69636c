"""``[discord] streaming``: what each value makes of the adapter's capabilities, and a bad
value's one readable message."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.discord.adapter import CHANNEL_LIMIT, DiscordAdapter
from adapters.discord.platform import build
from adapters.platforms import AdapterContext
from core.store.sqlite import SqliteStore
from gateway.config import ConfigError, parse_config


def adapter_for(store: SqliteStore, tmp_path: Path, **discord: object) -> DiscordAdapter:
    data: dict[str, object] = {"discord": {"token": "t", **discord}}
    config = parse_config(data, None, {"COMMONOS_HOME": str(tmp_path)})
    section = config.platform("discord")
    built = build(section, AdapterContext(store=store, data_dir=tmp_path))
    assert isinstance(built, DiscordAdapter)
    return built


@pytest.mark.parametrize(
    ("configured", "mode"), [(None, "edit"), ("native", "edit"), ("edit", "edit"), ("off", "off")]
)
def test_native_means_edit_on_discord_and_off_is_off(
    store: SqliteStore, tmp_path: Path, configured: str | None, mode: str
) -> None:
    keys = {} if configured is None else {"streaming": configured}
    capabilities = adapter_for(store, tmp_path, **keys).capabilities
    assert capabilities.streaming == mode
    assert capabilities.chat_limit == CHANNEL_LIMIT
    assert CHANNEL_LIMIT is not None and (CHANNEL_LIMIT.count, CHANNEL_LIMIT.seconds) == (5, 5.0)
    assert capabilities.charges.chat == {"send", "edit"}


def test_streamed_edits_are_spread_over_the_channel_budget(
    store: SqliteStore, tmp_path: Path
) -> None:
    assert adapter_for(store, tmp_path, edit_interval=0.2).capabilities.stream_interval == 1.0
    assert adapter_for(store, tmp_path, edit_interval=2.5).capabilities.stream_interval == 2.5


def test_an_unknown_streaming_value_is_one_readable_message(tmp_path: Path) -> None:
    data = {"discord": {"token": "t", "streaming": "live"}}
    with pytest.raises(ConfigError) as refused:
        parse_config(data, None, {"COMMONOS_HOME": str(tmp_path)})
    assert 'expected one of "native", "edit", "off"' in str(refused.value)
    assert "streaming" in str(refused.value)
