"""The one redactor: every secret shape it promises is masked, ordinary text is untouched."""

from __future__ import annotations

import pytest

from core.hooks.builtin import redact as hook_redact
from core.redaction import MASK, redact
from gateway.redact import preview
from gateway.redact import redact as gateway_redact

TELEGRAM = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

SECRETS: list[tuple[str, str]] = [
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
    ("sha 0123456789abcdef0123456789abcdef0123", "0123456789abcdef0123456789abcdef"),
    ("GET /api/v1/0123456789abcdef0123456789abcdef/items", "0123456789abcdef0123456789abcdef"),
    ("blob dGhpc0lzQVNlY3JldEJsb2JPZlJhbmRvbUJ5dGVzMTIz==", "dGhpc0lzQVNlY3JldEJsb2JP"),
]

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


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_secret_does_not_survive_redaction(text: str, secret: str) -> None:
    redacted = redact(text)
    assert secret not in redacted
    assert MASK in redacted


@pytest.mark.parametrize("text", HARMLESS)
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert redact(text) == text


def test_redaction_keeps_what_names_the_secret() -> None:
    assert redact("Authorization: Token abc123xyz") == f"Authorization: Token {MASK}"
    assert redact("postgres://admin:pw123456@db/x") == f"postgres://admin:{MASK}@db/x"
    assert redact(f"https://api.telegram.org/bot{TELEGRAM}/getMe") == (
        f"https://api.telegram.org/bot{MASK}/getMe"
    )
    assert redact("PRIVATE_KEY='abc def'") == f"PRIVATE_KEY='{MASK}'"


def test_a_jwt_is_masked_whole() -> None:
    assert redact(f"jwt={JWT};") == f"jwt={MASK};"
    assert redact(f"see {JWT} here") == f"see {MASK} here"


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_hook_prompts_and_chat_previews_use_the_same_redactor(text: str, secret: str) -> None:
    assert hook_redact(text) == redact(text)
    assert secret not in gateway_redact(text)
    assert secret not in preview({"command": text}, limit=400)
