"""The one retry layer for a platform's rate limits (HTTP 429 and its ``retry_after``).

Every outbound call of a bot goes through its :class:`gateway.outbound.scheduler.OutboundScheduler`,
which is that layer: after a ``RateLimited`` it logs one INFO line naming the chat and the
wait, counts it, holds the chat for ``retry_after`` seconds and calls again — at most
``MAX_ATTEMPTS`` calls in all, and never for a wait over ``MAX_RETRY_AFTER`` seconds. Past
either bound one error line names the chat and what was given up, and the ``RateLimited``
goes to the caller marked ``final``. The SDKs' own retrying is switched off.

:func:`with_rate_limits` applies the same rules around one call of an adapter that is *not*
behind a scheduler (a bare adapter in a unit test). A ``RateLimited`` marked ``final`` —
the scheduler already retried it — is never retried again: there is one layer, not two.
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
MAX_ATTEMPTS = 30
"""Calls of one outbound request in all, the first included (a flood of short waits is
waited out; a reply is late rather than lost)."""


def may_retry(exc: RateLimited, attempt: int, attempts: int, chat: ChatRef, what: str) -> bool:
    """Log one 429 (INFO: chat and wait); False (and an error line) past the bounds."""
    if exc.final or attempt >= attempts or exc.retry_after > MAX_RETRY_AFTER:
        if not exc.final:
            why = f"rate limited for {exc.retry_after:.0f}s after {attempt} attempt(s)"
            logger.error("%s in %s given up (%s)", what, chat, why)
        exc.final = True
        return False
    logger.info(
        "%s in %s rate limited: waiting %.2fs (attempt %d)", what, chat, exc.retry_after, attempt
    )
    return True


async def with_rate_limits(
    call: Callable[[], Awaitable[T]], *, attempts: int, sleep: Sleep, chat: ChatRef, what: str
) -> T:
    """``call()``'s result, rate limits waited out within the bounds above."""
    attempt = 1
    while True:
        try:
            return await call()
        except RateLimited as exc:
            if not may_retry(exc, attempt, attempts, chat, what):
                raise
            attempt += 1
            await sleep(exc.retry_after)
