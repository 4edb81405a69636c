"""The step callback: an observation point for the gateway (seed 001 §3.6).

Before each model call after the first, the loop calls ``step_callback(iteration,
prev_tools)``: ``iteration`` is the 1-based number of the model call about to be made and
``prev_tools`` lists ``{"name", "result", "arguments"}`` for each tool call of the latest
assistant tool-call message, with the results of the tool messages that follow it. The
callback may be sync or async; any exception is logged at debug level and ignored —
observation code must never affect the turn.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from typing import Any

from core.agent.turn import StepCallback
from core.types import ChatMessage

logger = logging.getLogger(__name__)


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
    callback: StepCallback | None, iteration: int, tools: list[dict[str, Any]]
) -> None:
    if callback is None:
        return
    try:
        result = callback(iteration, tools)
        if inspect.isawaitable(result):
            await result
    except Exception as error:
        logger.debug("step_callback error (iteration %s): %s", iteration, error)
