"""``[attachments]``, ``[transcription]`` and a profile's ``vision`` (docs/attachments.md):
defaults, one readable line per malformed value, the API key from the environment and
remembered as a secret, and what the wiring builds from them."""

from __future__ import annotations

import pytest

from core.attachments import ATTACHMENT_KINDS
from gateway.config import ConfigError, parse_config
from gateway.config.log_redaction import config_secrets
from gateway.turns.transcription import Transcriber
from gateway.wiring import _attachments

KEY = "gsk_transcription_key_0123456789"


def test_defaults_take_every_kind_up_to_20_mb_and_transcribe_nothing() -> None:
    config = parse_config({}, None, {})
    assert config.attachments.max_bytes == 20971520
    assert config.attachments.kinds == ATTACHMENT_KINDS
    assert config.attachments.inline_bytes == 16384
    assert config.transcription.base_url is None
    assert _attachments(config).transcriber is None
    profile = config.agent_profile()
    assert profile.vision is False and profile.inline_bytes == 16384


@pytest.mark.parametrize(
    ("table", "line"),
    [
        ({"attachments": {"max_bytes": 0}}, "attachments.max_bytes: expected a positive integer"),
        ({"attachments": {"max_bytes": "20 MB"}}, 'got "20 MB" (string)'),
        (
            {"attachments": {"kinds": ["image", "photo"]}},
            'attachments.kinds: expected kinds among "image", "document", "audio", "voice", '
            '"video", got "photo"',
        ),
        ({"attachments": {"kinds": "image"}}, "attachments.kinds: expected an array"),
        ({"attachments": {"inline_bytes": -1}}, "attachments.inline_bytes: expected an integer"),
        ({"attachments": {"max_byte": 1}}, 'unknown key (did you mean "max_bytes"?)'),
        ({"transcription": {"base_url": "api.groq.com"}}, "expected an http:// or https:// URL"),
        ({"transcription": {"timeout": 0}}, "transcription.timeout: expected a positive number"),
        ({"transcription": {"model": ""}}, "transcription.model: expected a non-empty string"),
        ({"profiles": {"default": {"vision": "yes"}}}, "vision: expected true or false"),
    ],
)
def test_a_malformed_value_is_one_readable_line(table: dict[str, object], line: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(table, None, {})
    (error,) = raised.value.errors
    assert line in error


def test_the_api_key_comes_from_the_environment_and_is_a_secret() -> None:
    table = {"transcription": {"base_url": "https://api.groq.com/openai/v1", "api_key": "x"}}
    config = parse_config(table, None, {"COMMONOS_TRANSCRIPTION_API_KEY": KEY})
    assert config.transcription.api_key == KEY
    assert KEY in config_secrets(config)


def test_the_wiring_builds_the_transcriber_and_the_limits_from_the_config() -> None:
    table = {
        "attachments": {"max_bytes": 1000, "kinds": ["image", "voice"], "inline_bytes": 10},
        "transcription": {"base_url": "http://127.0.0.1:8000/v1", "model": "small"},
        "profiles": {"default": {"vision": True}},
    }
    config = parse_config(table, None, {})
    built = _attachments(config)
    assert built.limits.max_bytes == 1000
    assert built.limits.kinds == frozenset({"image", "voice"})
    assert isinstance(built.transcriber, Transcriber)
    assert built.transcriber.config.model == "small" and built.transcriber.config.api_key == ""
    profile = config.agent_profile()
    assert profile.vision is True and profile.inline_bytes == 10
