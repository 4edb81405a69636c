"""Observation points for the gateway: the step callback and turn notices.

**The step callback** (``docs/turn-loop.md`` §12). At the top of every iteration, before anything
else is sent to the model, the loop calls ``step_callback(iteration, prev_tools)``:
``iteration`` is the 1-based number of the model call about to be made and ``prev_tools``
lists ``{"name", "result", "arguments"}`` for each tool call of this turn's latest
assistant tool-call message, with the results of the tool messages that follow it — an
empty list on the first iteration (and whenever the turn has not called a tool yet).

**Turn notices.** Events the user should hear about while the turn runs, as data
(:data:`TurnNotice`); the gateway decides how to show them. Today: :class:`ModelSlow`, a
model call (its retries included) from which nothing has arrived for a while, and
:class:`ModelSlowEnded`, its answer flowing after all (``docs/turn-loop.md`` §4;
:mod:`core.agent.slow_notice`).

**Reply text** (``docs/turn-loop.md`` §16). With a streaming profile, the text of the
model call in flight as it arrives (:data:`TextEvent`): :class:`ReplyText` with the text
so far, and :class:`ReplyTextReset` when what was shown must be discarded (the attempt
failed and is retried, the call turned out to be tool calls, was stopped or failed). See
:mod:`core.agent.reply_text` for how it is relayed.

Every kind of callback may be sync or async. Observation code must never affect the
turn: an exception is logged at debug level and ignored; an async callback is awaited
for at most :data:`OBSERVER_SECONDS` (then abandoned, a warning logged) and under the
turn's token, so ``/stop`` never waits for it.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from core.agent.turn import StepCallback
from core.cancellation import CancellationToken, Cancelled
from core.types import ChatMessage

logger = logging.getLogger(__name__)

OBSERVER_SECONDS = 1.0
"""Time box for one async step callback or notice callback."""


@dataclass(frozen=True, slots=True)
class ModelSlow:
    """Nothing has arrived from a model call for ``waited`` seconds; it is still trying."""

    iteration: int
    """The 1-based model call of the turn."""
    attempt: int
    """The HTTP attempt in flight (1 = the first try)."""
    max_attempts: int
    waited: float
    """Seconds since anything arrived (the call's start or its last streamed chunk)."""
    last_error: str | None = None
    """What the last failed attempt was (e.g. ``"timeout"``, ``"server: 503"``)."""

    @property
    def retrying(self) -> bool:
        """An attempt failed and another is under way (not: the first one still waits)."""
        return self.attempt > 1


@dataclass(frozen=True, slots=True)
class ModelSlowEnded:
    """The call ``iteration`` reported by :class:`ModelSlow` is answering after all."""

    iteration: int


TurnNotice = ModelSlow | ModelSlowEnded
"""Every notice a turn can give."""

NoticeCallback = Callable[[TurnNotice], Any]
"""``on_notice(notice)``; sync or async, never affects the turn."""


@dataclass(frozen=True, slots=True)
class ReplyText:
    """The text the model call ``iteration`` has streamed so far."""

    iteration: int
    text: str
    """Everything this call has said so far (since the last reset)."""
    delta: str
    """What was added since the listener last heard: the whole ``text`` after a reset."""


ResetReason = Literal["retry", "tool_calls", "stopped", "failed"]


@dataclass(frozen=True, slots=True)
class ReplyTextReset:
    """Discard the text shown for call ``iteration``: it is not (or not yet) the reply."""

    iteration: int
    reason: ResetReason


TextEvent = ReplyText | ReplyTextReset
"""Every reply-text event."""

TextCallback = Callable[[TextEvent], Any]
"""``on_text(event)``; sync or async, never affects the turn."""


def prev_tools(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """``[{name, result, arguments}]`` of the latest assistant message that called tools."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "assistant" and message.tool_calls:
            results = _results_after(messages[index + 1 :])
            return [
                {"name": c.name, "result": results.get(c.id), "arguments": c.arguments}
                for c in message.tool_calls
            ]
    return []


def _results_after(messages: Sequence[ChatMessage]) -> dict[str, str]:
    results: dict[str, str] = {}
    for message in messages:
        if message.role != "tool":
            break
        if message.tool_call_id:
            results[message.tool_call_id] = message.text()
    return results


async def notify_step(
    callback: StepCallback | None,
    iteration: int,
    tools: list[dict[str, Any]],
    token: CancellationToken | None = None,
) -> None:
    """Call the step callback; it never raises, never outlives its time box or a stop."""
    if callback is None:
        return
    what = f"step_callback (iteration {iteration})"
    await observe(partial(callback, iteration, tools), token, what)


async def notify_notice(
    callback: NoticeCallback | None, notice: TurnNotice, token: CancellationToken | None = None
) -> None:
    """Hand a notice to the gateway, under the same rules as the step callback."""
    if callback is None:
        return
    await observe(partial(callback, notice), token, f"notice callback ({type(notice).__name__})")


async def observe(
    call: Callable[[], object],
    token: CancellationToken | None,
    what: str,
    seconds: float = OBSERVER_SECONDS,
) -> None:
    """Run one observer call: errors logged at debug, async work boxed and stoppable."""
    try:
        result = call()
        if inspect.isawaitable(result):
            await CancellationToken.time_boxed(_stoppable(result, token), seconds)
    except Cancelled:
        return  # the loop's next check ends the turn
    except TimeoutError:
        logger.warning("%s took longer than %gs; abandoned", what, seconds)
    except Exception as error:
        logger.debug("%s error: %s", what, error)


async def _stoppable(work: Awaitable[object], token: CancellationToken | None) -> object:
    return await (work if token is None else token.guard(work))
