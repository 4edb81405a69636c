"""The redactor knows the configured secret values: masked verbatim, base64-encoded at any
byte alignment (both alphabets) and URL-encoded; in chat and in logs alike."""

from __future__ import annotations

import base64
import logging
import re
from urllib.parse import quote, quote_plus

import pytest

from core.redaction import MASK, encoded_forms, redact, remember_secrets
from gateway.config.log_redaction import RedactSecrets

SECRET = "Zq9/x+Kp:W3mN0vB4-known-value"


@pytest.fixture(autouse=True, scope="module")
def known() -> None:
    remember_secrets([SECRET])


@pytest.mark.parametrize(
    "shown",
    [
        SECRET,
        quote(SECRET, safe=""),
        re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(SECRET, safe="")),
        quote_plus(SECRET),
        base64.b64encode(SECRET.encode()).decode(),
        base64.urlsafe_b64encode(SECRET.encode()).decode(),
        base64.b64encode(b"a" + SECRET.encode()).decode(),
        base64.b64encode(b"ab" + SECRET.encode() + b"\n").decode(),
        base64.b64encode(f"export TOKEN={SECRET}; echo done".encode()).decode(),
    ],
)
def test_a_known_secret_is_masked_in_every_form(shown: str) -> None:
    text = redact(f"the output: {shown} (end)")
    assert MASK in text
    core = shown[4:-4]
    assert core not in text


def test_short_values_are_not_remembered() -> None:
    remember_secrets(["abc12"])
    assert redact("abc12 stays") == "abc12 stays"


def test_redacting_twice_changes_nothing() -> None:
    once = redact(f"password=hunter2 token={SECRET}", "***")
    assert redact(once, "***") == once


def test_the_log_filter_masks_the_encoded_forms_too() -> None:
    log_filter = RedactSecrets([SECRET])
    encoded = base64.b64encode(SECRET.encode()).decode()
    record = logging.LogRecord(
        "x", logging.INFO, "f", 1, "got %s and %s", (encoded, quote(SECRET)), None
    )
    log_filter.filter(record)
    message = record.getMessage()
    assert encoded[:-4] not in message and quote(SECRET, safe="") not in message
    assert {SECRET} <= encoded_forms(SECRET)
