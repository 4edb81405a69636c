"""Retry a model call: exponential backoff with full jitter, honouring ``retry_after``.

After each failed attempt, in this order:

1. ``on_error(error)`` observes the failure (the engine's ``api_request_error`` hook);
   an observer that raises is logged and ignored.
2. ``reclassify(classification)`` may replace the classification (the engine's
   ``transform_api_error_classification`` hook), e.g. to make a provider's 400 retryable;
   a reclassifier that raises is logged and the original classification stands.
3. If the (possibly new) classification is not retryable, attempts are used up, or the
   server asks us to wait longer than ``max_retry_after``, the error is raised.
4. Otherwise we sleep ``retry_after`` if the server gave one, else a random delay in
   ``[0, min(max_delay, base_delay * 2 ** (attempt - 1))]``, and try again.

The sleep is a plain ``asyncio.sleep``: cancelling the task aborts it at once.
Retrying a streamed call sends its text deltas again from the start.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from core.model.errors import ErrorClassification, ModelError

_log = logging.getLogger(__name__)

T = TypeVar("T")
Reclassify = Callable[[ErrorClassification], Awaitable[ErrorClassification]]
ErrorObserver = Callable[[ModelError], Awaitable[None]]


SLOW_NOTICE_SECONDS = 20.0
"""Default: tell the user after this long without an answer from the model."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard to try, and when to say so.

    ``max_attempts`` counts the first call (1 means no retry; the configuration's
    ``max_retries`` is ``max_attempts - 1``, see :meth:`with_retries`).
    ``slow_notice_seconds``: after this long without an answer (retries and backoff
    included) the engine tells the user the model is not answering; 0 never does.
    """

    max_attempts: int = 4
    base_delay: float = 1.0
    max_delay: float = 30.0
    max_retry_after: float = 120.0
    slow_notice_seconds: float = SLOW_NOTICE_SECONDS

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"retry max_attempts must be at least 1, got {self.max_attempts}")
        delays = (self.base_delay, self.max_delay, self.max_retry_after, self.slow_notice_seconds)
        if min(delays) < 0:
            raise ValueError("retry delays must not be negative")

    @classmethod
    def with_retries(
        cls, max_retries: int, *, slow_notice_seconds: float = SLOW_NOTICE_SECONDS
    ) -> RetryPolicy:
        """The policy for ``[model] max_retries`` (0: one request, never retried)."""
        return cls(max_attempts=max_retries + 1, slow_notice_seconds=slow_notice_seconds)

    def delay(self, found: ErrorClassification, attempt: int, rng: random.Random) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or ``None`` to give up."""
        if not found.retryable or attempt >= self.max_attempts:
            return None
        if found.retry_after is not None:
            return found.retry_after if found.retry_after <= self.max_retry_after else None
        return rng.uniform(0.0, min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))


async def call_with_retry(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy | None = None,
    *,
    reclassify: Reclassify | None = None,
    on_error: ErrorObserver | None = None,
    rng: random.Random | None = None,
) -> T:
    """Await ``attempt()`` until it succeeds or its :class:`ModelError` may not be retried."""
    policy = policy or RetryPolicy()
    rng = rng or random.Random()
    number = 1
    while True:
        try:
            return await attempt()
        except ModelError as error:
            final = await _settle(error, reclassify, on_error)
            wait = policy.delay(final.classification, number, rng)
            if wait is None and final is error:
                raise
            if wait is None:
                raise final from error
        _log.warning("model call failed (%s); attempt %d in %.2fs", final, number + 1, wait)
        await asyncio.sleep(wait)
        number += 1


async def _settle(
    error: ModelError, reclassify: Reclassify | None, on_error: ErrorObserver | None
) -> ModelError:
    if on_error is not None:
        try:
            await on_error(error)
        except Exception:
            _log.exception("model error observer failed; going on")
    if reclassify is None:
        return error
    try:
        found = await reclassify(error.classification)
    except Exception:
        _log.exception("error reclassification failed; keeping %s", error.kind)
        return error
    return error if found == error.classification else ModelError(found, server=error.server)
