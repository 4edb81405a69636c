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

With a streaming request and an ``on_text`` listener, the call's text goes to it as it
arrives (:class:`core.agent.reply_text.TextRelay`, ``docs/turn-loop.md`` §16): reset when
an attempt fails and is retried, when the answer turns out to be tool calls (not on the
grace call, whose tool calls are dropped), and when the call is stopped or fails for
good. The relay is drained before ``call`` returns or raises.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from core.agent.reply_text import TextRelay
from core.agent.scope import TurnScope
from core.agent.step import ModelSlow, NoticeCallback, TextCallback, notify_notice
from core.cancellation import CancellationToken, Cancelled
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
        on_text: TextCallback | None = None,
    ) -> None:
        self._model = model
        self._hooks = hooks
        self._policy = policy
        self._scope = scope.hook_args()
        self._on_notice = on_notice
        self._on_text = on_text

    async def call(
        self, request: ModelRequest, iteration: int, token: CancellationToken
    ) -> ModelReply:
        """The reply, or :class:`ModelError` once retries are spent, or ``Cancelled``."""
        if self._on_text is None or not request.stream or request.on_delta is not None:
            return await self._call(request, iteration, token, None)
        relay = TextRelay(self._on_text, iteration, token)
        try:
            reply = await self._call(replace(request, on_delta=relay.feed), iteration, token, relay)
        except Cancelled:
            await relay.close("stopped")
            raise
        except ModelError:
            await relay.close("failed")
            raise
        except BaseException:
            relay.abandon()
            raise
        grace = request.extra.get("tool_choice") == "none"  # its tool calls are dropped
        await relay.close("tool_calls" if reply.tool_calls and not grace else None)
        return reply

    async def _call(
        self,
        request: ModelRequest,
        iteration: int,
        token: CancellationToken,
        relay: TextRelay | None,
    ) -> ModelReply:
        attempts = _Attempts(time.monotonic())

        async def attempt() -> ModelReply:
            attempts.number += 1
            if relay is not None:
                relay.reset("retry")  # the last attempt's text, if reclassify did not drop it
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
            final = await self._hooks.transform(
                "transform_api_error_classification", found, **self._scope, iteration=iteration
            )
            if relay is not None:  # drop the failed attempt's text now, not after the backoff
                relay.reset("retry" if self._retries(final, attempts.number) else "failed")
            return final

        def retrying() -> Awaitable[ModelReply]:
            policy = self._policy
            return call_with_retry(attempt, policy, reclassify=reclassify, on_error=on_error)

        return await token.guard(self._watched(retrying, iteration, attempts, token))

    def _retries(self, found: ErrorClassification, attempt: int) -> bool:
        """Whether :func:`call_with_retry` makes another attempt after this failure."""
        return self._policy.delay(found, attempt, random.Random(0)) is not None

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
