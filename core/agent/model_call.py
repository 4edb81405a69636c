"""One model call of the loop, with its hooks and retries (``docs/turn-loop.md`` §4).

Every model call goes through here: the loop's iterations and grace call, and the
compaction summary calls (made for a turn, or by ``/compact`` with an empty ``turn_id``).

Each attempt fires ``pre_api_request`` → the HTTP call → ``post_api_request``. A failed
attempt fires ``api_request_error`` and then ``transform_api_error_classification``, whose
result decides whether :func:`core.model.retry.call_with_retry` tries again (at most
``RetryPolicy.max_attempts`` requests in all). The whole call, backoff sleeps included,
runs under ``token.guard``: cancelling the turn aborts the in-flight request at once and
nothing partial is kept.

When nothing has arrived from the call for ``RetryPolicy.slow_notice_seconds`` (every
streamed chunk resets the wait), the turn's notice callback gets a
:class:`core.agent.step.ModelSlow` (:mod:`core.agent.slow_notice`) — so a hung model is
never silence, and a flowing stream never gets one; the call itself goes on until it
answers, its retries are spent or the turn is stopped.

A call that fails for good is logged once (WARNING: the kind, the server's status and
message; the log handlers mask secrets) and :func:`readable_failure` is the user's reply:
what kind of failure it was, in words (``docs/turn-loop.md`` §4, "Failures").

With a streaming request and an ``on_text`` listener, the call's text goes to it as it
arrives (:class:`core.agent.reply_text.TextRelay`, ``docs/turn-loop.md`` §16): reset when
an attempt fails and is retried, when the answer turns out to be tool calls (not on the
grace call, whose tool calls are dropped), and when the call is stopped or fails for
good. The relay is drained before ``call`` returns or raises.

With a :class:`core.agent.usage.UsageMeter`, a limited meter is asked before the call (its
:class:`core.agent.usage.QuotaReached` propagates: no request is made) and told what the
finished call spent (the server's usage, or the estimate).

Each call is a ``model.call`` span (:mod:`core.tracing`): the model's name, the iteration,
then its token counts, finish reason and how many tool calls it asked for; retries are
inside it, a failure for good marks it failed (by the error's type).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial

from core import tracing
from core.agent.failure_text import readable_failure
from core.agent.reply_text import TextRelay
from core.agent.scope import TurnScope
from core.agent.slow_notice import SilenceWatch
from core.agent.step import NoticeCallback, TextCallback, TurnNotice, notify_notice
from core.agent.usage import ModelSpend, UsageMeter, estimated_usage
from core.cancellation import CancellationToken, Cancelled
from core.hooks.registry import HookRegistry
from core.model.base import ModelClient, ModelRequest
from core.model.errors import ErrorClassification, ModelError
from core.model.retry import RetryPolicy, call_with_retry
from core.redaction import redact
from core.types import ModelReply

__all__ = ["ModelCaller", "readable_failure"]

logger = logging.getLogger(__name__)


class ModelCaller:
    def __init__(
        self,
        model: ModelClient,
        hooks: HookRegistry,
        policy: RetryPolicy,
        scope: TurnScope,
        on_notice: NoticeCallback | None = None,
        on_text: TextCallback | None = None,
        meter: UsageMeter | None = None,
    ) -> None:
        self._model = model
        self._hooks = hooks
        self._policy = policy
        self._turn = scope
        self._meter = meter
        self._on_notice = on_notice
        self._on_text = on_text

    async def call(
        self, request: ModelRequest, iteration: int, token: CancellationToken
    ) -> ModelReply:
        """The reply, or :class:`ModelError` once retries are spent, or ``Cancelled``, or
        :class:`core.agent.usage.QuotaReached` before any request."""
        meter = self._meter
        if meter is not None and meter.limited:
            await token.guard(meter.admit(self._turn))
        if tracing.tracer is None:  # telemetry off: no span
            reply = await self._relayed(request, iteration, token)
        else:
            reply = await self._traced(request, iteration, token)
        if meter is not None:
            usage = reply.usage if reply.usage.reported else estimated_usage(request, reply)
            await meter.record(ModelSpend(self._turn, self._model.model, usage))
        return reply

    async def _traced(
        self, request: ModelRequest, iteration: int, token: CancellationToken
    ) -> ModelReply:
        """The call as a ``model.call`` span with its figures (never its text)."""
        name = self._model.model
        with tracing.span("model.call", **{"model.name": name}, iteration=iteration) as span:
            reply = await self._relayed(request, iteration, token)
            span.set("tokens.prompt", reply.usage.prompt_tokens or None)
            span.set("tokens.completion", reply.usage.completion_tokens or None)
            span.set("finish_reason", reply.finish_reason)
            span.set("tool_calls", len(reply.tool_calls))
        return reply

    async def _relayed(
        self, request: ModelRequest, iteration: int, token: CancellationToken
    ) -> ModelReply:
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
        watch = SilenceWatch(
            self._policy.slow_notice_seconds,
            iteration,
            self._policy.max_attempts,
            lambda notice: self._tell(notice, token),
        )
        if request.stream:
            request = replace(request, on_activity=watch.heard)

        async def attempt() -> ModelReply:
            watch.attempt_started()
            if relay is not None and watch.attempt > 1:
                relay.reset("retry")  # the last attempt's text, if reclassify did not drop it
            hooks = self._hooks
            if "pre_api_request" in hooks.live:
                messages = [m.to_wire() for m in request.messages]
                await hooks.notify(
                    "pre_api_request", **self._turn.common, iteration=iteration, messages=messages
                )
            reply = await self._model.complete(request)
            if "post_api_request" in hooks.live:
                await hooks.notify(
                    "post_api_request", **self._turn.common, iteration=iteration, reply=reply
                )
            return reply

        async def on_error(error: ModelError) -> None:
            watch.failed(_detail(error))
            if "api_request_error" in self._hooks.live:
                await self._hooks.notify(
                    "api_request_error", **self._turn.common, iteration=iteration, error=error
                )

        async def reclassify(found: ErrorClassification) -> ErrorClassification:
            final = found
            if "transform_api_error_classification" in self._hooks.live:
                final = await self._hooks.transform(
                    "transform_api_error_classification",
                    found,
                    **self._turn.common,
                    iteration=iteration,
                )
            if relay is not None:  # drop the failed attempt's text now, not after the backoff
                relay.reset("retry" if self._retries(final, watch.attempt) else "failed")
            return final

        retrying = partial(
            call_with_retry, attempt, self._policy, reclassify=reclassify, on_error=on_error
        )
        try:
            return await token.guard(self._watched(retrying, watch))
        except ModelError as error:
            self._log_failure(error, iteration, watch.attempt)
            raise

    def _log_failure(self, error: ModelError, iteration: int, attempts: int) -> None:
        """The one log line of a call that failed for good (retries spent or none allowed)."""
        found = error.classification
        status = "no HTTP status" if found.status is None else f"HTTP {found.status}"
        logger.warning(
            "turn %s: model call %d failed after %d attempt(s): %s (%s): %s",
            self._turn.turn_id, iteration, attempts, found.kind, status, redact(found.message),
        )  # fmt: skip

    def _retries(self, found: ErrorClassification, attempt: int) -> bool:
        """Whether :func:`call_with_retry` makes another attempt after this failure."""
        return self._policy.delay(found, attempt, random.Random(0)) is not None

    async def _watched(
        self, start: Callable[[], Awaitable[ModelReply]], watch: SilenceWatch
    ) -> ModelReply:
        """``start()``, with its silence watch beside it while it runs."""
        if self._on_notice is None or self._policy.slow_notice_seconds <= 0:
            return await start()
        watch.start(f"model-slow:{self._turn.turn_id}")
        try:
            return await start()
        finally:
            await watch.stop()

    async def _tell(self, notice: TurnNotice, token: CancellationToken) -> None:
        await notify_notice(self._on_notice, notice, token)


def _detail(error: ModelError) -> str:
    found = error.classification
    return f"{found.kind}: {found.status}" if found.status is not None else found.kind
