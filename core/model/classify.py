"""Translate what goes wrong on the wire into an :class:`ErrorClassification`.

This is the edge where httpx exceptions and HTTP error replies become our error tree
(see :mod:`core.model.errors`)::

    HTTP 401 / 403                          -> auth
    HTTP 429                                -> rate_limited  (retry_after from headers/body;
                                               "insufficient_quota" is not retryable)
    HTTP 400 / 413 with context wording     -> context_too_long (with the prompt's size in
                                               the server's tokens when the body says it)
    HTTP 408                                -> timeout
    HTTP 5xx                                -> server        (Retry-After honoured)
    any other HTTP 4xx                      -> bad_response
    httpx.TimeoutException                  -> timeout
    httpx.TransportError (connect, reset)   -> network
    invalid or non-http(s) base_url         -> network, not retryable
    non-JSON body, wrong shape              -> bad_response  (see ``bad_response``)

Every message names the cause in words a user can act on; the raw body is quoted, cut short.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from typing import Any

import httpx

from core.model.errors import ErrorClassification

_CONTEXT_WORDS = (
    # The one list of context-overflow wordings (docs/turn-loop.md §18); the real bodies
    # are test data in tests/support/model_errors.py.
    "context_length_exceeded",  # OpenAI: code
    "maximum context length",  # OpenAI, vLLM: "This model's maximum context length is …"
    "context length",  # Ollama: "the input length exceeds the context length"
    "exceed_context_size_error",  # llama.cpp llama-server: type
    "available context size",  # llama.cpp: "request (N tokens) exceeds the available …"
    "context window",
    "too many tokens",
    "prompt is too long",
    "input is too long",
    "reduce the length",
)
_PROMPT_TOKENS = (
    re.compile(r"resulted in (\d+) tokens"),  # OpenAI: "However, your messages resulted in N"
    re.compile(r"\((\d+) in the messages"),  # vLLM: "you requested N tokens (M in the messages"
    re.compile(r"request \((\d+) tokens\)"),  # llama.cpp: "request (N tokens) exceeds …"
)
_RETRY_IN = re.compile(r"(?:try again|retry) (?:in|after) (\d+(?:\.\d+)?)\s*(ms|s|sec|seconds)?\b")
_QUOTE_LIMIT = 300
_JINJA = "Jinja Exception:"


def quote(text: str, limit: int = _QUOTE_LIMIT) -> str:
    """A body excerpt for an error message: one line, cut at a readable length — at a word's
    end, never inside a word."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    head = flat[: limit + 1]
    cut = head.rfind(" ")
    return (head[:cut] if cut > limit // 2 else flat[:limit]).rstrip(" ,;:") + "…"


def bad_response(message: str, *, status: int | None = None) -> ErrorClassification:
    return ErrorClassification.of("bad_response", message, status=status)


def classify_status(response: httpx.Response, body: str) -> ErrorClassification:
    """Classify a non-2xx reply from its status, headers and (already read) body."""
    status = response.status_code
    detail = error_detail(body)
    message = f"model server returned HTTP {status}: {detail}"
    if status in (401, 403):
        return ErrorClassification.of("auth", message, status=status)
    if status == 429:
        return _rate_limited(response.headers, body, message)
    if status in (400, 413) and mentions_context_length(body):
        tokens = prompt_tokens(body)
        return ErrorClassification.of(
            "context_too_long", message, status=status, prompt_tokens=tokens
        )
    if status == 408:
        return ErrorClassification.of("timeout", message, status=status)
    if status >= 500:  # a 503 may say when to come back
        retry_after = header_retry_after(response.headers)
        return ErrorClassification.of("server", message, status=status, retry_after=retry_after)
    return bad_response(message, status=status)


def classify_error_object(error: object, *, status: int | None = None) -> ErrorClassification:
    """Classify an ``{"error": ...}`` object found inside a 200 reply or an SSE event."""
    text = json.dumps(error) if not isinstance(error, str) else error
    message = f"model server reported an error: {error_detail(json.dumps({'error': error}))}"
    if mentions_context_length(text):
        tokens = prompt_tokens(text)
        return ErrorClassification.of(
            "context_too_long", message, status=status, prompt_tokens=tokens
        )
    lowered = text.lower()
    if "rate_limit" in lowered or "rate limit" in lowered:
        return ErrorClassification.of("rate_limited", message, retry_after=_body_retry_after(text))
    if any(word in lowered for word in ("server_error", "overloaded", "internal error")):
        return ErrorClassification.of("server", message, status=status)
    return bad_response(message, status=status)


def classify_transport(exc: httpx.HTTPError | httpx.InvalidURL, url: str) -> ErrorClassification:
    """Classify an httpx exception raised before a complete reply arrived."""
    name = type(exc).__name__
    reason = str(exc) or name
    if isinstance(exc, httpx.InvalidURL):
        message = f"model base_url gives an invalid URL {url!r}: {reason}"
        return ErrorClassification.of("network", message).with_retryable(False)
    if isinstance(exc, httpx.TimeoutException):
        return ErrorClassification.of("timeout", f"model server at {url} timed out ({name})")
    if isinstance(exc, httpx.UnsupportedProtocol):
        message = f"model base_url {url!r} is not an http(s) URL: {reason}"
        return ErrorClassification.of("network", message).with_retryable(False)
    if isinstance(exc, httpx.TransportError):
        message = f"cannot reach model server at {url}: {name}: {reason}"
        return ErrorClassification.of("network", message)
    return bad_response(f"unreadable reply from model server at {url}: {reason}")


def mentions_context_length(body: str) -> bool:
    lowered = body.lower()
    return any(word in lowered for word in _CONTEXT_WORDS)


def prompt_tokens(body: str) -> int | None:
    """How many tokens the server counted in the request it found too long, when its error
    says: llama.cpp's ``n_prompt_tokens`` field, else the count in its words."""
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        parsed = None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    counted = error.get("n_prompt_tokens") if isinstance(error, dict) else None
    if isinstance(counted, int) and not isinstance(counted, bool) and counted > 0:
        return counted
    for pattern in _PROMPT_TOKENS:
        match = pattern.search(body)
        if match is not None:
            return int(match.group(1))
    return None


def template_exception(message: str) -> str:
    """A chat template's own exception first: llama.cpp wraps it in a parser-generation
    error and the template's source, so the words that say what is wrong
    ("…conversation roles must alternate…") would come last and be cut off."""
    if _JINJA not in message:
        return message
    raised = " ".join(message.rsplit(_JINJA, 1)[1].split())
    return f"the chat template refused the request: {raised}"


def error_detail(body: str) -> str:
    """The provider's own error message when the body has one, else the body quoted."""
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        return quote(body) if body.strip() else "(empty body)"
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return quote(template_exception(error["message"]))
    if isinstance(error, str):
        return quote(error)
    return quote(body)


def _rate_limited(headers: httpx.Headers, body: str, message: str) -> ErrorClassification:
    retry_after = header_retry_after(headers)
    if retry_after is None:
        retry_after = _body_retry_after(body)
    if retry_after is not None:
        message += f" (retry after {retry_after:g}s)"
    found = ErrorClassification.of("rate_limited", message, status=429, retry_after=retry_after)
    if "insufficient_quota" in body:
        return found.with_retryable(False)  # out of credit: waiting will not help
    return found


def header_retry_after(headers: httpx.Headers, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP-date)."""
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    raw = headers.get("retry-after")
    if raw is None:
        return None
    seconds = _number(raw)
    if seconds is not None:
        return seconds
    return _seconds_until(raw, time.time() if now is None else now)


def _seconds_until(http_date: str, now: float) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def _body_retry_after(body: str) -> float | None:
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        parsed = None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict):
        seconds = _number(error.get("retry_after"))
        if seconds is not None:
            return seconds
    match = _RETRY_IN.search(body.lower())
    if match is None:
        return None
    value = float(match.group(1))
    return value / 1000 if match.group(2) == "ms" else value


def _number(raw: object) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        return max(0.0, float(raw))
    if not isinstance(raw, str):
        return None
    try:
        return max(0.0, float(raw.strip()))
    except ValueError:
        return None
