"""``[web]``: on by default on loopback; a network address needs a token."""

from __future__ import annotations

import pytest

from gateway.config import ConfigError, parse_config


def errors(data: dict[str, object], env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, None, env or {})
    return caught.value.errors


def test_with_no_config_the_web_chat_listens_on_loopback_8765() -> None:
    config = parse_config({}, None, {})
    web = config.platform("web")
    assert web is not None
    assert (web.listen, web.token, web.name) == (
        "127.0.0.1:8765",
        None,
        "local",
    )


def test_enabled_false_turns_it_off() -> None:
    assert parse_config({"web": {"enabled": False}}, None, {}).platform("web") is None


def test_a_non_loopback_listen_without_a_token_is_refused_at_config_time() -> None:
    assert errors({"web": {"listen": "0.0.0.0:8765"}}) == [
        '<built-in defaults>: web.listen: "0.0.0.0:8765" is not a loopback address: set '
        "[web] token (or the env var COMMONOS_WEB_TOKEN) so that every request needs it"
    ]


def test_the_token_may_come_from_the_environment_and_is_never_shown() -> None:
    env = {"COMMONOS_WEB_TOKEN": "s3cret-web-token"}
    config = parse_config({"web": {"listen": "0.0.0.0:8765"}}, None, env)
    assert config.platform("web") is not None and config.platform("web").token == "s3cret-web-token"
    assert "s3cret-web-token" not in repr(config)


def test_a_bad_name_is_one_readable_error() -> None:
    assert errors({"web": {"name": "a b"}}) == [
        '<built-in defaults>: web.name: expected 1-64 characters of A-Z a-z 0-9 _ . @ -, got "a b"'
    ]
