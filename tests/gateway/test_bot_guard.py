"""Bots in chats (README.md "Bots in chats"): which bots are read (``allow_bots``), how
the keys read from config.toml, and the guard's pacing per bot pair on an injected clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import ConfigError, load_config
from gateway.control.access import AccessControl, AccessPolicy
from gateway.control.bot_guard import BotGuard, BotLimits
from gateway.wiring import _access
from tests.gateway.fakes import Person, event

HELPER = Person("7001", "HelperBot", is_bot=True)
OTHER = Person("7002", "OtherBot", is_bot=True)
ALICE = Person("1", "Alice")


def control(**policy: object) -> AccessControl:
    return AccessControl({"fake": AccessPolicy(**policy)})  # type: ignore[arg-type]


def test_bots_are_ignored_by_default_even_when_everyone_is_allowed() -> None:
    rules = control(allowed_users=frozenset({"*"}))
    assert rules.check(event(HELPER, "hi")) == "ignore"
    assert rules.check(event(ALICE, "hi")) == "admit"


def test_a_list_of_bot_ids_reads_just_those_without_an_allowed_users_entry() -> None:
    rules = control(allow_bots=frozenset({"7001"}))
    assert rules.check(event(HELPER, "hi")) == "admit"
    assert rules.check(event(OTHER, "hi")) == "ignore"
    assert rules.check(event(Person("7001", "NotABot"), "hi")) == "deny"  # a person: listed?


def test_true_reads_every_bot_that_may_talk() -> None:
    rules = control(allowed_users=frozenset({"7001"}), allow_bots=True)
    assert rules.check(event(HELPER, "hi")) == "admit"
    assert rules.check(event(OTHER, "hi")) == "deny"


def config_of(tmp_path: Path, lines: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[telegram]\ntoken = "t"\n{lines}\n', encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("value", "read"),
    [("false", False), ("true", True), ('["7001", 7002]', frozenset({"7001", "7002"}))],
)
def test_allow_bots_reads_true_false_or_a_list(tmp_path: Path, value: str, read: object) -> None:
    config = load_config(config_of(tmp_path, f"allow_bots = {value}"), env={})
    policy = _access(config, "telegram")
    assert policy.allow_bots == read
    assert policy.bot_limits == BotLimits(10, 600.0)


def test_bot_keys_get_one_clear_error(tmp_path: Path) -> None:
    text = 'allow_bots = "yes"\nbot_exchanges_per_minute = 0\nbot_mute_seconds = -1'
    path = config_of(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert caught.value.errors == [
        f"{path}: telegram.allow_bots: expected true, false or an array of bot ids, "
        f'got "yes" (string)',
        f"{path}: telegram.bot_exchanges_per_minute: expected a positive integer, got 0",
        f"{path}: telegram.bot_mute_seconds: expected a positive number, got -1",
    ]


def test_configured_limits_reach_the_policy(tmp_path: Path) -> None:
    text = "allow_bots = [7001]\nbot_exchanges_per_minute = 3\nbot_mute_seconds = 30"
    config = load_config(config_of(tmp_path, text), env={})
    assert _access(config, "telegram").bot_limits == BotLimits(3, 30.0)


class ManualClock:
    def __init__(self) -> None:
        self.time = 0.0

    def now(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += seconds


def guard(clock: ManualClock, per_minute: int = 3, mute: float = 120.0) -> BotGuard:
    return BotGuard(lambda _platform: BotLimits(per_minute, mute), clock.now)


def test_over_the_limit_one_notice_then_muted_until_the_mute_ends() -> None:
    clock = ManualClock()
    pace = guard(clock)
    verdicts = [pace.check(event(HELPER, "hi")) for _ in range(6)]
    assert verdicts == ["pass", "pass", "pass", "notice", "muted", "muted"]
    clock.advance(119)
    assert pace.check(event(HELPER, "hi")) == "muted"
    clock.advance(1)
    assert [pace.check(event(HELPER, "hi")) for _ in range(4)] == [
        "pass", "pass", "pass", "notice",
    ]  # fmt: skip


def test_the_window_slides_over_one_minute() -> None:
    clock = ManualClock()
    pace = guard(clock)
    for _ in range(3):
        assert pace.check(event(HELPER, "hi")) == "pass"
        clock.advance(25)
    assert pace.check(event(HELPER, "hi")) == "pass"  # the first is 75 s old
    assert pace.check(event(HELPER, "hi")) == "notice"


def test_pairs_are_counted_apart_and_people_never() -> None:
    clock = ManualClock()
    pace = guard(clock, per_minute=1)
    assert [pace.check(event(HELPER, "x")) for _ in range(2)] == ["pass", "notice"]
    assert pace.check(event(OTHER, "x")) == "pass"
    assert pace.check(event(HELPER, "x", platform="other")) == "pass"
    assert {pace.check(event(ALICE, "x")) for _ in range(50)} == {"pass"}
