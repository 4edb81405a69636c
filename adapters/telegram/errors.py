"""python-telegram-bot exceptions, translated into the adapter error tree at the edge.

::

    telegram.error.RetryAfter                          -> RateLimited(retry_after)
    BadRequest "message is not modified"               -> NotModified
    BadRequest "message to edit/delete not found"      -> MessageGone
    BadRequest "message is too long"                   -> TooLong
    BadRequest "can't parse entities"                  -> BadMarkup
    telegram.error.Forbidden                           -> Forbidden
    any other TelegramError                            -> AdapterError

PTB capitalises the description and strips the ``Bad Request:`` prefix, so matching is on
the lower-cased message.
"""

from __future__ import annotations

import datetime as dtm
from collections.abc import Iterator
from contextlib import contextmanager

from telegram import error as tg

from adapters.base import (
    AdapterError,
    BadMarkup,
    Forbidden,
    MessageGone,
    NotModified,
    RateLimited,
    TooLong,
)

_BAD_REQUEST_KINDS: tuple[tuple[str, type[AdapterError]], ...] = (
    ("message is not modified", NotModified),
    ("message to edit not found", MessageGone),
    ("message to delete not found", MessageGone),
    ("message can't be deleted", MessageGone),
    ("message is too long", TooLong),
    ("text is too long", TooLong),
    ("can't parse entities", BadMarkup),
)


def retry_after_seconds(exc: tg.RetryAfter) -> float:
    """``retry_after`` in seconds, whether PTB hands it out as int or timedelta."""
    value = exc.retry_after
    if isinstance(value, dtm.timedelta):
        return value.total_seconds()
    return float(value)


def translate(exc: tg.TelegramError) -> AdapterError:
    """The adapter error for one PTB exception."""
    if isinstance(exc, tg.RetryAfter):
        return RateLimited(retry_after_seconds(exc), exc.message)
    if isinstance(exc, tg.Forbidden):
        return Forbidden(exc.message)
    if isinstance(exc, tg.BadRequest):
        text = exc.message.lower()
        for needle, kind in _BAD_REQUEST_KINDS:
            if needle in text:
                return kind(exc.message)
    return AdapterError(f"{type(exc).__name__}: {exc.message}")


@contextmanager
def platform_errors() -> Iterator[None]:
    """Re-raise any ``TelegramError`` raised inside as its adapter error."""
    try:
        yield
    except tg.TelegramError as exc:
        raise translate(exc) from exc
