"""discord.py exceptions, translated into the adapter error tree at the edge.

::

    discord.RateLimited (a wait over max_ratelimit_timeout)   -> RateLimited(retry_after)
    HTTPException 429 (given up by discord.py)                 -> RateLimited
    NotFound 10008 Unknown Message / 10003 Unknown Channel     -> MessageGone
    HTTPException 50035 with a "2000 or fewer" content error   -> TooLong
    HTTPException 413 / 40005 Request entity too large (a file) -> TooLong
    Forbidden                                                  -> Forbidden
    any other DiscordException                                 -> AdapterError

discord.py itself waits out 429s by their ``retry_after`` and retries (its per-route
buckets); nothing here retries again. What reaches :func:`translate` is what discord.py
gave up on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import discord

from adapters.base import AdapterError, Forbidden, MessageGone, RateLimited, TooLong

GONE_CODES = frozenset({10003, 10008})
"""Unknown Channel, Unknown Message."""
ENTITY_TOO_LARGE = 40005
"""Request entity too large: a file over the upload limit (413)."""
THREAD_EXISTS = 160004
"""A thread has already been created for this message."""
TOKEN_GONE = frozenset({10008, 10015, 50027})
"""An interaction's response can no longer be edited: Unknown Message (the response was
deleted), Unknown Webhook, Invalid Webhook Token (the 15-minute token expired)."""


def translate(exc: discord.DiscordException) -> AdapterError:
    """The adapter error for one discord.py exception."""
    if isinstance(exc, discord.RateLimited):
        return RateLimited(exc.retry_after, "discord rate limit")
    if isinstance(exc, discord.HTTPException):
        if exc.status == 429:
            return RateLimited(1.0, exc.text or "discord rate limit")
        if exc.code in GONE_CODES:
            return MessageGone(exc.text)
        if isinstance(exc, discord.Forbidden):
            return Forbidden(exc.text)
        if exc.code == 50035 and "or fewer in length" in exc.text:
            return TooLong(exc.text)
        if exc.code == ENTITY_TOO_LARGE or exc.status == 413:
            return TooLong(f"discord refused the file as over its upload limit ({exc.text})")
        return AdapterError(f"discord {exc.status} (code {exc.code}): {exc.text}")
    return AdapterError(f"{type(exc).__name__}: {exc}")


@contextmanager
def platform_errors() -> Iterator[None]:
    """Re-raise any ``DiscordException`` raised inside as its adapter error."""
    try:
        yield
    except discord.DiscordException as exc:
        raise translate(exc) from exc


class RateLimitCounter(logging.Handler):
    """Counts the 429s discord.py waited out (it logs each one on ``discord.http``).

    discord.py owns the waiting and the retry; this only makes the count visible
    (``DiscordAdapter.rate_limits``) and logs one line of ours per 429."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("We are being rate limited"):
            self.count += 1
