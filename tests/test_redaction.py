"""The redactors: a chat gets only the configured secret values masked — a commit id, a
run of letters, ``PWD=…`` or a UUID in a reply come back as written — while the logs also
get every credential shape the shape pass promises (and ordinary text is untouched)."""

from __future__ import annotations

import logging
import uuid

import pytest

from core.hooks.builtin import redact as hook_redact
from core.redaction import MASK, redact, redact_shapes, remember_secrets
from gateway.config.log_redaction import RedactSecrets
from gateway.turns.previews import preview
from gateway.turns.previews import redact as gateway_redact

BOT_TOKEN = "987654321:AAFz-configured-bot-token-value-0123"
MODEL_KEY = "sk-configured-model-key-abcdef0123456789"
COMMIT = "9fceb02d0ae598e95dc970b74767f19372d61af8"

TELEGRAM = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

SHAPES: list[tuple[str, str]] = [
    (f"bot token {TELEGRAM}", TELEGRAM),
    (f"GET https://api.telegram.org/bot{TELEGRAM}/getMe", TELEGRAM.split(":")[1]),
    ("key sk-proj-abcdefghijklmnop0123", "abcdefghijklmnop0123"),
    ("export GH=ghp_abcdefghijklmnopqrstuvwxyz0123", "ghp_abcdefghijklmnopqrst"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijkl", "11ABCDEFG0123456789"),
    ("slack xoxb-1234567890-abcdefghij", "1234567890-abcdefghij"),
    (f"token {JWT} end", "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"),
    (f"token {JWT} end", "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"),
    ("curl -H 'Authorization: Bearer tok123456789' https://x", "tok123456789"),
    ("Authorization: Token abc123xyz", "abc123xyz"),
    ("Authorization: abc123xyz", "abc123xyz"),
    ('{"authorization": "Basic dXNlcjpwYXNz"}', "dXNlcjpwYXNz"),
    ("bearer abcdef123456", "abcdef123456"),
    ("psql postgres://admin:hunter2pass@db.internal:5432/app", "hunter2pass"),
    ("git clone https://bob:s3cr3t@github.com/x/y.git", "s3cr3t"),
    ("deploy --password hunter2 --verbose", "hunter2"),
    ("deploy --password=hunter2", "hunter2"),
    ("cli --token abc.def.ghi", "abc.def.ghi"),
    ("cli --secret=topsecretvalue", "topsecretvalue"),
    ("cli --api-key 'k1 k2'", "k1 k2"),
    ("mysql -u root -pSECRETPW mydb", "SECRETPW"),
    ("openai_key=opensesame42 python run.py", "opensesame42"),
    ("PRIVATE_KEY=abcdef", "abcdef"),
    ("DB_PASSWORD: 'correct horse battery'", "correct horse"),
    ("db_passwd=letmein", "letmein"),
    ("SLACK_TOKEN=xyzzy", "xyzzy"),
    ("client_secret: mysterious", "mysterious"),
    ('{"api_key": "plain-value"}', "plain-value"),
    ("OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx curl", "sk-abcdef"),
    ("maps AIzaSyA1234567890abcdefghijklmnopqrstu", "AIzaSyA1234567890abcdef"),
    ("aws AKIAIOSFODNN7EXAMPLE region", "AKIAIOSFODNN7EXAMPLE"),
    ("blob dGhpc0lzQVNlY3JldEJsb2JPZlJhbmRvbUJ5dGVzMTIz==", "dGhpc0lzQVNlY3JldEJsb2JP"),
]
"""Credentials nobody configured, by their shape: masked in the logs only."""

HARMLESS = [
    "Please summarise the meeting notes and email them to the team by Friday.",
    "The bearer of good news arrived; the key question is when, not how.",
    "ls -la /home/user/projects && cd src && make test",
    "git log --oneline -n 20 | grep fix",
    "python -m pytest -q tests/test_store.py -k 'not slow'",
    "curl -s https://api.example.com/v1/items?page=2&limit=50",
    "docker run --rm -p 8080:80 -v /srv/data:/data nginx:1.25",
    "mysql -u root -p mydb < dump.sql",
    "max_tokens=1500 temperature=0.2",
    "ssh deploy@10.0.0.5 'systemctl restart app'",
    "/Users/Alice2/Documents/Projects/Website/index.html",
    "a_long_snake_case_identifier_without_any_secret_inside",
    "Meet at 10:30; bring the slides (v2) — thanks!",
    "authorization is required before merging",
]


REPLY_TEXTS = [
    f"fixed in commit {COMMIT}",
    f"git show {COMMIT[:12]} and git log {COMMIT}..HEAD",
    "ACK " + "A" * 200,
    "export PWD=/home/x && cd $PWD",
    f"request id {uuid.UUID(int=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0)}",
    f"session {uuid.UUID(COMMIT[:32]).hex}",
]
"""What an agent may well write in an answer: never masked in a chat."""

IDS = [
    "turn 0123456789abcdef0123456789abcdef ended",
    f"GET /api/v1/{uuid.UUID(COMMIT[:32]).hex}/items",
    f"pushed {COMMIT}",
]
"""Hex ids (the gateway's turn and session ids are 32 hex digits): kept even in logs."""


@pytest.fixture(autouse=True, scope="module")
def configured() -> None:
    remember_secrets([BOT_TOKEN, MODEL_KEY])


@pytest.mark.parametrize("text", REPLY_TEXTS)
def test_a_reply_keeps_what_only_looks_like_a_secret(text: str) -> None:
    assert redact(text) == text
    assert gateway_redact(text) == text


@pytest.mark.parametrize("text", REPLY_TEXTS)
def test_the_configured_secrets_in_the_same_reply_are_masked(text: str) -> None:
    reply = f"{text}\ntoken {BOT_TOKEN}, key={MODEL_KEY}"
    assert redact(reply) == f"{text}\ntoken {MASK}, key={MASK}"


@pytest.mark.parametrize(("text", "secret"), SHAPES)
def test_a_secret_shape_is_not_guessed_at_in_a_chat(text: str, secret: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(("text", "secret"), SHAPES)
def test_a_secret_shape_does_not_survive_the_shape_pass(text: str, secret: str) -> None:
    redacted = redact_shapes(text)
    assert secret not in redacted
    assert MASK in redacted


def logged(message: str, *args: object) -> str:
    """``message % args`` as the log filter lets it be written."""
    record = logging.LogRecord("x", logging.INFO, "f", 1, message, args, None)
    RedactSecrets([BOT_TOKEN, MODEL_KEY]).filter(record)
    return record.getMessage()


@pytest.mark.parametrize(("text", "secret"), SHAPES)
def test_the_logs_keep_the_shape_pass(text: str, secret: str) -> None:
    line = logged("tool said: %s", text)
    assert secret not in line and MASK in line


def test_the_logs_mask_the_configured_secrets_and_a_credential_shape_together() -> None:
    line = logged("GET /bot%s/getMe with Authorization: Bearer %s", BOT_TOKEN, "tok123456789")
    assert BOT_TOKEN not in line and "tok123456789" not in line
    assert line.startswith("GET /bot98…23/getMe")


@pytest.mark.parametrize("text", IDS)
def test_hex_ids_stay_readable_even_in_the_logs(text: str) -> None:
    assert redact_shapes(text) == text
    assert logged("%s", text) == text


@pytest.mark.parametrize("text", HARMLESS + REPLY_TEXTS[:1])
def test_ordinary_text_is_unchanged_by_either_pass(text: str) -> None:
    assert redact(text) == text
    assert redact_shapes(text) == text


def test_the_shape_pass_keeps_what_names_the_secret() -> None:
    assert redact_shapes("Authorization: Token abc123xyz") == f"Authorization: Token {MASK}"
    assert redact_shapes("postgres://admin:pw123456@db/x") == f"postgres://admin:{MASK}@db/x"
    assert redact_shapes(f"https://api.telegram.org/bot{TELEGRAM}/getMe") == (
        f"https://api.telegram.org/bot{MASK}/getMe"
    )
    assert redact_shapes("PRIVATE_KEY='abc def'") == f"PRIVATE_KEY='{MASK}'"


def test_the_shape_pass_masks_a_jwt_whole() -> None:
    assert redact_shapes(f"jwt={JWT};") == f"jwt={MASK};"
    assert redact_shapes(f"see {JWT} here") == f"see {MASK} here"


def test_hook_prompts_and_chat_previews_use_the_chats_redactor() -> None:
    command = f"curl -H 'Authorization: Bearer {MODEL_KEY}' https://x/{COMMIT}"
    assert hook_redact(command) == redact(command)
    assert hook_redact(command) == f"curl -H 'Authorization: Bearer {MASK}' https://x/{COMMIT}"
    assert MODEL_KEY not in gateway_redact(command)
    assert preview({"command": command}, limit=400) == command.replace(MODEL_KEY, "***")
