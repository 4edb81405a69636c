"""The secret redactors: :func:`redact` for everything shown to a chat or a prompt, and
:func:`redact_shapes` for the logs.

**In chat, only the configured secret values.** The redactor knows the *exact values* of the
configured secrets (bot tokens, API keys, signing secrets — :func:`remember_secrets`, called
when the gateway loads its config) and masks each wherever it appears: verbatim,
base64-encoded (standard and URL-safe alphabets, at any byte alignment, so a value inside a
larger encoded blob is caught too) and URL-encoded (``%3A`` or ``%3a``). Nothing else is
touched: a git commit id, a run of one letter, ``PWD=/home/x`` or a UUID in a reply comes
back as the agent wrote it — guessing at shapes in the agent's own answers damages them.
Values shorter than :data:`MIN_SECRET_LENGTH` are too likely to occur in ordinary text and
are ignored.

**In the logs, also the shapes** (:func:`redact_shapes`, applied by
:mod:`gateway.config.log_redaction` after the known values): a tripwire for credentials nobody
configured, which a library or a traceback may print. It replaces the credential with a
mask and keeps what names it, so the reader still sees *that* a secret was there:

- passwords inside URLs: ``scheme://user:PASS@host`` (the user name stays);
- ``Authorization:`` header values, with or without a scheme (``Bearer``, ``Basic``,
  ``Token`` …), and a free-standing ``Bearer <token>`` / ``Basic <token>``;
- command-line flags ``--password``, ``--passwd``, ``--token``, ``--secret``,
  ``--api-key`` followed by a space or ``=``, and MySQL's attached ``-pSECRET``;
- assignments ``NAME=value`` / ``NAME: value`` (also quoted, JSON-style) where NAME ends
  in key, token, secret, password, passwd, pwd, credential(s) or auth, or contains
  secret, password, passwd, api_key or access_token (case-insensitive);
- well-known token shapes, whole: OpenAI-style ``sk-…``, GitHub ``ghp_…`` /
  ``github_pat_…``, Slack ``xox?-…``, AWS ``AKIA…``, Google ``AIza…``, Telegram bot
  tokens ``123456789:AA…`` (also inside ``…/bot<token>/getMe``), JWTs ``eyJ….….…``;
- runs of 32+ base64/base64url characters that mix upper case, lower case and digits
  (path-like runs with only short pieces between ``/`` are kept).

Bare hex runs are not masked, not even in the logs: the gateway's own turn and session ids
are 32 hex digits, and a log that hides them cannot be followed.
"""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Callable, Iterable
from urllib.parse import quote, quote_plus

MASK = "[REDACTED]"
MIN_SECRET_LENGTH = 6
"""Known secret values shorter than this are not matched (too likely in ordinary text)."""
MIN_ENCODED_FRAGMENT = 8
"""Shortest base64 fragment of a known value that is matched on its own."""

_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][\w+.-]*://[^\s/:@]+:)([^\s/@]+)(@)")
_AUTHORIZATION = re.compile(
    r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?(?:[a-z]+\s+(?=[^\s\"',;]))?)[^\s\"',;]+"
)
_BEARER = re.compile(
    r"\b((?:[Bb]earer|[Bb]asic)\s+)"
    r"(?:(?=[\w.~+/-]*\d)[\w.~+/-]{8,}|[\w.~+/-]{20,})=*"
)
_SECRET_FLAG = re.compile(
    r"(?i)(--(?:password|passwd|token|secret|api[-_]?key)(?:=|\s+))"
    r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']+)"
)
_MYSQL_PASSWORD = re.compile(r"(\bmysql\w*\b[^\n;|&]*?\s-p)[^\s\"']+")
_SECRET_NAME = (
    r"[\w.-]*?(?:key|token|secret|passw(?:or)?d|pwd|credentials?|auth)"
    r"|[\w.-]*?(?:secret|passw(?:or)?d|api[_-]?key|access[_-]?token)[\w-]*"
)
_ASSIGNMENT = re.compile(
    rf"(?i)(\b(?:{_SECRET_NAME})[\"']?\s*[:=]\s*)"
    r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;&]+)"
)
_TOKEN_SHAPES = re.compile(
    r"\beyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*"
    r"|\bsk-[\w-]{8,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{16,}"
    r"|\bgithub_pat_\w{20,}"
    r"|\bxox[abposr]-[\w-]{8,}"
    r"|\bAKIA[0-9A-Z]{12,}"
    r"|\bAIza[\w-]{30,}"
    r"|(?<![\d])\d{6,12}:[\w-]{30,}"
)
_LONG_BASE64 = re.compile(r"(?<![\w+/=-])[A-Za-z0-9+/_-]{32,}={0,2}(?![\w+/=-])")
_MIXED_PIECE_LENGTH = 20


class KnownSecrets:
    """Exact secret values and their encoded forms, matched by one compiled pattern."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._lock = threading.Lock()

    def add(self, values: Iterable[str]) -> None:
        with self._lock:
            fresh = {v for v in values if len(v) >= MIN_SECRET_LENGTH} - self._values
            if not fresh:
                return
            self._values |= fresh
            forms = {form for value in self._values for form in encoded_forms(value)}
            alternatives = sorted(forms, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(f) for f in alternatives))

    def mask(self, text: str, mask: str) -> str:
        pattern = self._pattern
        return text if pattern is None else pattern.sub(mask, text)

    def found_in(self, text: str) -> bool:
        """``text`` holds a known value in one of its forms (masking would change it)."""
        pattern = self._pattern
        return pattern is not None and pattern.search(text) is not None


def encoded_forms(value: str) -> set[str]:
    """``value`` verbatim, URL-encoded, and the parts of its base64 encodings that depend
    only on its own bytes (at each of the three byte alignments, both alphabets)."""
    forms = {value, quote(value, safe=""), quote(value), quote_plus(value)}
    forms |= {_lower_escapes(form) for form in list(forms)}
    raw = value.encode("utf-8")
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        start = -(-offset * 8 // 6)  # the first character holding none of the padding bytes
        end = (offset + len(raw)) * 8 // 6  # the last one holding only the value's bits
        fragment = encoded[start:end]
        if len(fragment) >= MIN_ENCODED_FRAGMENT:
            forms |= {fragment, fragment.replace("+", "-").replace("/", "_")}
    return {form for form in forms if form}


def _lower_escapes(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), text)


KNOWN = KnownSecrets()
"""The process's configured secret values (:func:`remember_secrets` adds to it)."""


def remember_secrets(values: Iterable[str]) -> None:
    """Teach the redactor these exact secret values (and their encoded forms)."""
    KNOWN.add(values)


def redact(text: str, mask: str = MASK) -> str:
    """``text`` with the known secret values (in every encoding above) replaced by ``mask``,
    and nothing else: what every text to a chat or a prompt gets."""
    return KNOWN.mask(text, mask)


def redact_shapes(text: str, mask: str = MASK) -> str:
    """``text`` with every credential *shape* in the module doc masked (for the logs; the
    known values are the caller's to mask first)."""
    for pattern, replace in _passes(mask):
        text = pattern.sub(replace, text)
    return text


def _passes(mask: str) -> tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...]:
    keep_first = _keep_first(mask)
    return (
        (_URL_PASSWORD, lambda m: f"{m.group(1)}{mask}{m.group(3)}"),
        (_AUTHORIZATION, keep_first),
        (_BEARER, keep_first),
        (_SECRET_FLAG, keep_first),
        (_MYSQL_PASSWORD, keep_first),
        (_ASSIGNMENT, _keep_name(mask)),
        (_TOKEN_SHAPES, lambda m: mask),
        (_LONG_BASE64, lambda m: mask if _looks_random(m.group(0)) else m.group(0)),
    )


_MASKS = frozenset({MASK, "***"})
"""Values that are already masks are left alone, so redacting twice changes nothing."""


def _masked_already(match: re.Match[str]) -> bool:
    return match.group(0)[len(match.group(1)) :].strip("'\"") in _MASKS


def _keep_first(mask: str) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        return match.group(0) if _masked_already(match) else f"{match.group(1)}{mask}"

    return replace


def _keep_name(mask: str) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        if _masked_already(match):
            return match.group(0)
        value = match.group(0)[len(match.group(1)) :]
        quote = value[0] if value[:1] in ("'", '"') else ""
        return f"{match.group(1)}{quote}{mask}{quote}"

    return replace


def _looks_random(run: str) -> bool:
    """Base64-ish, not a path: some ``/``-free piece mixes upper case, lower case, digits."""
    pieces = run.split("/") if "/" in run else [run]
    return any(
        len(piece) >= _MIXED_PIECE_LENGTH and _mixes_cases_and_digits(piece) for piece in pieces
    )


def _mixes_cases_and_digits(piece: str) -> bool:
    return (
        any(c.isupper() for c in piece)
        and any(c.islower() for c in piece)
        and any(c.isdigit() for c in piece)
    )
