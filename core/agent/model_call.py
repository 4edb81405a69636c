"""One model call of the loop, with its hooks and retries (``docs/turn-loop.md`` §4).

Each attempt fires ``pre_api_request`` → the HTTP call → ``post_api_request``. A failed
attempt fires ``api_request_error`` and then ``transform_api_error_classification``, whose
result decides whether :func:`core.model.retry.call_with_retry` tries again (at most
``RetryPolicy.max_attempts`` requests in all). The whole call, backoff sleeps included,
runs under ``token.guard``: cancelling the turn aborts the in-flight request at once and
nothing partial is kept.

When the call has gone ``RetryPolicy.slow_notice_seconds`` without an answer, the turn's
notice callback gets one :class:`core.agent.step.ModelSlow` (the attempt in flight, the
last error) — so a hung model is never silence; the call itself goes on until it answers,
its retries are spent (:func:`readable_failure` is then the reply) or the turn is stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from core.agent.scope import TurnScope
from core.agent.step import ModelSlow, NoticeCallback, notify_notice
from core.cancellation import CancellationToken
from core.hooks.registry import HookRegistry
from core.model.base import ModelClient, ModelRequest
from core.model.errors import ErrorClassification, ModelError
from core.model.retry import RetryPolicy, call_with_retry
from core.types import ModelReply

_UNAVAILABLE = "The model is unavailable right now ({detail}). Nothing was lost; try again."
_REJECTED = "The model could not answer this request ({detail}). Nothing was lost."


@dataclass(slots=True)
class _Attempts:
    """How far one model call got: the attempt in flight and the last failure."""

    started: float
    number: int = 0
    last_error: str | None = None


class ModelCaller:
    def __init__(
        self,
        model: ModelClient,
        hooks: HookRegistry,
        policy: RetryPolicy,
        scope: TurnScope,
        on_notice: NoticeCallback | None = None,
    ) -> None:
        self._model = model
        self._hooks = hooks
        self._policy = policy
        self._scope = scope.hook_args()
        self._on_notice = on_notice

    async def call(
        self, request: ModelRequest, iteration: int, token: CancellationToken
    ) -> ModelReply:
        """The reply, or :class:`ModelError` once retries are spent, or ``Cancelled``."""
        attempts = _Attempts(time.monotonic())

        async def attempt() -> ModelReply:
            attempts.number += 1
            messages = [m.to_wire() for m in request.messages]
            await self._hooks.notify(
                "pre_api_request", **self._scope, iteration=iteration, messages=messages
            )
            reply = await self._model.complete(request)
            await self._hooks.notify(
                "post_api_request", **self._scope, iteration=iteration, reply=reply
            )
            return reply

        async def on_error(error: ModelError) -> None:
            attempts.last_error = _detail(error)
            await self._hooks.notify(
                "api_request_error", **self._scope, iteration=iteration, error=error
            )

        async def reclassify(found: ErrorClassification) -> ErrorClassification:
            return await self._hooks.transform(
                "transform_api_error_classification", found, **self._scope, iteration=iteration
            )

        def retrying() -> Awaitable[ModelReply]:
            policy = self._policy
            return call_with_retry(attempt, policy, reclassify=reclassify, on_error=on_error)

        return await token.guard(self._watched(retrying, iteration, attempts, token))

    async def _watched(
        self,
        start: Callable[[], Awaitable[ModelReply]],
        iteration: int,
        attempts: _Attempts,
        token: CancellationToken,
    ) -> ModelReply:
        """``start()``, with a notice timer beside it while it runs."""
        seconds = self._policy.slow_notice_seconds
        if self._on_notice is None or seconds <= 0:
            return await start()
        timer = asyncio.create_task(
            self._notice_after(seconds, iteration, attempts, token),
            name=f"model-slow:{self._scope['turn_id']}:{iteration}",
        )
        try:
            return await start()
        finally:
            timer.cancel()
            await asyncio.wait({timer})  # the notice callback is itself time-boxed

    async def _notice_after(
        self, seconds: float, iteration: int, attempts: _Attempts, token: CancellationToken
    ) -> None:
        await asyncio.sleep(seconds)
        notice = ModelSlow(
            iteration=iteration,
            attempt=max(attempts.number, 1),
            max_attempts=self._policy.max_attempts,
            waited=time.monotonic() - attempts.started,
            last_error=attempts.last_error,
        )
        await notify_notice(self._on_notice, notice, token)


def _detail(error: ModelError) -> str:
    found = error.classification
    return f"{found.kind}: {found.status}" if found.status is not None else found.kind


def readable_failure(error: ModelError) -> str:
    """What the user reads when the model call finally failed."""
    template = _UNAVAILABLE if error.classification.retryable else _REJECTED
    return template.format(detail=_detail(error))
