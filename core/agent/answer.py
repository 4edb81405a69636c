"""What the chat is shown of the model's final answer (``docs/turn-loop.md`` §17).

The model's ``finish_reason`` says whether its answer is whole:

- ``length`` — it reached its output limit: the text is shown with :data:`CUT_OFF_NOTE`
  after it (stored as the model gave it, so "continue" in the next turn goes on from there);
- ``content_filter`` — the provider stopped it: :data:`FILTERED_NOTE`;
- an answer with no text at all is never silent: :data:`EMPTY_ANSWER`, or
  :data:`EMPTY_CUT_OFF` when it was cut off before it said anything (and the like for a
  filter or a cut tool call).

Tool-call markup in the text (``<tool_call>…``: the server's chat template produced a call
the server could not parse, often because it was cut off) is not an answer: it is taken out
of the text before the reply is stored (:func:`without_tool_markup`), and the chat is told
the call was not run (:data:`MARKUP_NOTE`).
"""

from __future__ import annotations

import re
from dataclasses import replace

from core.types import FinishReason, ModelReply

CUT_OFF_NOTE = "… (cut off: the model reached its output limit — say “continue” to go on)"
FILTERED_NOTE = "… (cut off: the provider's content filter stopped the answer)"
MARKUP_NOTE = (
    "(The model wrote a tool call the model server could not read, so it was not run"
    " — say “continue” to let it try again.)"
)
EMPTY_ANSWER = "The model returned an empty answer."
EMPTY_CUT_OFF = (
    "The model's answer was cut off before it said anything (it reached its output limit)."
)
EMPTY_CUT_IN_CALL = (
    "The model's answer was cut off while it was writing a tool call (it reached its output"
    " limit), so nothing was run — say “continue” to let it try again."
)
EMPTY_FILTERED = "The provider's content filter stopped the model's answer before it said anything."
EMPTY_MARKUP = (
    "The model wrote a tool call the model server could not read, so nothing was run"
    " — say “continue” to let it try again."
)

TOOL_MARKUP = re.compile(
    r"^[ \t]*(?:<tool_call>|<\|tool_call\|?>|<\|python_tag\|>|\[TOOL_CALLS\]|<function=)",
    re.MULTILINE,
)
"""The start of a tool call written as text (Hermes/Qwen, Granite, Llama 3.1, Mistral,
Functionary), at the start of a line: from there to the end the text is markup."""


def without_tool_markup(reply: ModelReply) -> tuple[ModelReply, bool]:
    """``reply`` with any tool-call markup cut from its text, and whether there was some."""
    content = reply.content or ""
    found = TOOL_MARKUP.search(content)
    if found is None:
        return reply, False
    return replace(reply, content=content[: found.start()].rstrip()), True


def shown_answer(text: str, finish_reason: FinishReason | None, markup: bool = False) -> str:
    """The reply the chat gets for the final answer ``text`` (see the module docstring)."""
    if not text.strip():
        return _empty(finish_reason, markup)
    said = text.rstrip()
    if finish_reason == "length":
        return f"{said}\n\n{CUT_OFF_NOTE}"
    if finish_reason == "content_filter":
        return f"{said}\n\n{FILTERED_NOTE}"
    return f"{said}\n\n{MARKUP_NOTE}" if markup else text


def _empty(finish_reason: FinishReason | None, markup: bool) -> str:
    if finish_reason == "length":
        return EMPTY_CUT_IN_CALL if markup else EMPTY_CUT_OFF
    if finish_reason == "content_filter":
        return EMPTY_FILTERED
    return EMPTY_MARKUP if markup else EMPTY_ANSWER
