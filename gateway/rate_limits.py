"""Waiting out a platform's rate limits around one call.

:func:`with_rate_limits` calls ``call()`` again after each ``RateLimited``, having slept
the ``retry_after`` the platform asked for, at most ``attempts`` calls in all. A wait of
more than ``MAX_RETRY_AFTER`` seconds is not waited out. Past either bound one error line
names the chat and what was given up, and the ``RateLimited`` goes to the caller.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from adapters.base import ChatRef, RateLimited

logger = logging.getLogger(__name__)

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]
MAX_RETRY_AFTER = 60.0
"""Longer waits than this are not waited out: the call is given up instead."""


async def with_rate_limits(
    call: Callable[[], Awaitable[T]], *, attempts: int, sleep: Sleep, chat: ChatRef, what: str
) -> T:
    """``call()``'s result, rate limits waited out within the bounds above."""
    attempt = 1
    while True:
        try:
            return await call()
        except RateLimited as exc:
            if attempt >= attempts or exc.retry_after > MAX_RETRY_AFTER:
                why = f"rate limited for {exc.retry_after:.0f}s after {attempt} attempt(s)"
                logger.error("%s in %s given up (%s)", what, chat, why)
                raise
            attempt += 1
            await sleep(exc.retry_after)
