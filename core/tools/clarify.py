"""The ``clarify`` tool: ask the user a question with fixed choices.

Interactive (``interactive=True``): the loop runs it alone, never in parallel with other
calls. The question goes through ``ToolContext.ask_choice`` (the approvals registry with
``kind="choice"``); the result is the chosen option, ``No answer (timed_out)`` when
nobody answered in time, or ``No answer (<outcome>)`` when the question was otherwise
settled without a choice (``ask_choice`` raises :class:`ChoiceNotMade`, e.g. ``denied``).
When the turn was cancelled meanwhile, :class:`~core.cancellation.Cancelled` propagates.
"""

from __future__ import annotations

from typing import Any

from core.tools.base import Choice, Tool, ToolContext, ToolResult
from core.types import ToolSpec

NO_ANSWER = "No answer (timed_out)"


class ChoiceNotMade(Exception):
    """``ask_choice`` was settled without a choice for a reason other than a timeout."""

    def __init__(self, outcome: str) -> None:
        super().__init__(outcome)
        self.outcome = outcome


MAX_CHOICES = 10

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "description": "The question to ask the user."},
        "choices": {
            "type": "array",
            "items": {"type": "string"},
            "description": f"2 to {MAX_CHOICES} short options the user picks from.",
        },
    },
    "required": ["question", "choices"],
}


def clarify_tool() -> Tool:
    spec = ToolSpec(
        name="clarify",
        description="Ask the user a multiple-choice question and wait for the answer.",
        parameters=PARAMETERS,
        risk="safe",
        interactive=True,
    )
    return Tool(spec=spec, handler=_clarify)


async def _clarify(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    choice = _parse(args)
    if isinstance(choice, str):
        return ToolResult(choice, is_error=True)
    if ctx.ask_choice is None:
        return ToolResult("clarify is not available in this session", is_error=True)
    try:
        answer = await ctx.ask_choice(choice)
    except ChoiceNotMade as declined:
        ctx.token.raise_if_cancelled()
        return ToolResult(f"No answer ({declined.outcome})")
    ctx.token.raise_if_cancelled()
    return ToolResult(answer if answer is not None else NO_ANSWER)


def _parse(args: dict[str, Any]) -> Choice | str:
    """The :class:`Choice` asked for, or an error message."""
    question, choices = args.get("question"), args.get("choices")
    if not isinstance(question, str) or not question.strip():
        return "clarify needs a non-empty 'question' string"
    if not isinstance(choices, list) or not all(isinstance(c, str) and c for c in choices):
        return "clarify needs 'choices': a list of non-empty strings"
    options = tuple(dict.fromkeys(choices))
    if not 2 <= len(options) <= MAX_CHOICES:
        return f"clarify needs 2 to {MAX_CHOICES} distinct choices, got {len(options)}"
    return Choice(question=question, choices=options)
