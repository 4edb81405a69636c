"""One model call of the loop, with its hooks and retries (seed 000 step 5).

Each attempt fires ``pre_api_request`` → the HTTP call → ``post_api_request``. A failed
attempt fires ``api_request_error`` and then ``transform_api_error_classification``, whose
result decides whether :func:`core.model.retry.call_with_retry` tries again. The whole
call, backoff sleeps included, runs under ``token.guard``: cancelling the turn aborts the
in-flight request at once and nothing partial is kept.
"""

from __future__ import annotations

from core.agent.scope import TurnScope
from core.cancellation import CancellationToken
from core.hooks.registry import HookRegistry
from core.model.base import ModelClient, ModelRequest
from core.model.errors import ErrorClassification, ModelError
from core.model.retry import RetryPolicy, call_with_retry
from core.types import ModelReply

_UNAVAILABLE = "The model is unavailable right now ({detail}). Nothing was lost; try again."
_REJECTED = "The model could not answer this request ({detail}). Nothing was lost."


class ModelCaller:
    def __init__(
        self, model: ModelClient, hooks: HookRegistry, policy: RetryPolicy, scope: TurnScope
    ) -> None:
        self._model = model
        self._hooks = hooks
        self._policy = policy
        self._scope = scope.hook_args()

    async def call(
        self, request: ModelRequest, iteration: int, token: CancellationToken
    ) -> ModelReply:
        """The reply, or :class:`ModelError` once retries are spent, or ``Cancelled``."""

        async def attempt() -> ModelReply:
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
            await self._hooks.notify(
                "api_request_error", **self._scope, iteration=iteration, error=error
            )

        async def reclassify(found: ErrorClassification) -> ErrorClassification:
            return await self._hooks.transform(
                "transform_api_error_classification", found, **self._scope, iteration=iteration
            )

        retrying = call_with_retry(attempt, self._policy, reclassify=reclassify, on_error=on_error)
        return await token.guard(retrying)


def readable_failure(error: ModelError) -> str:
    """What the user reads when the model call finally failed."""
    found = error.classification
    detail = f"{found.kind}: {found.status}" if found.status is not None else found.kind
    template = _UNAVAILABLE if found.retryable else _REJECTED
    return template.format(detail=detail)
