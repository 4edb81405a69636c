"""The ``schedule`` tool: the model sets a reminder or a recurring job itself ("remind me
tomorrow at 9") — README "Scheduled turns". The job runs ``prompt`` as a turn at the
time given and answers in this chat, like one made with ``/at``, ``/every`` or ``/cron``.

Its risk is ``dangerous``; the gateway asks the person first (an approval card) in the
profiles its config names (``[schedule] ask_in_profiles``). The tool only reads its
arguments; making the job is the gateway's (:data:`MakeJob`), which checks the schedule and
the person's limits and answers with what it made or why not.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from core.tools.base import Tool, ToolContext, ToolResult
from core.types import ToolSpec

When = Literal["at", "every", "cron"]

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prompt": {
            "type": "string",
            "description": "What you will do or say when it runs (an instruction to yourself).",
        },
        "at": {
            "type": "string",
            "description": "Once: 'YYYY-MM-DD HH:MM' or 'HH:MM' in the user's time zone, "
            "or a delay such as '10m' or '2h'.",
        },
        "every": {"type": "string", "description": "Repeat: an interval such as '1h' or '1d'."},
        "cron": {
            "type": "string",
            "description": "Repeat: a five-field cron expression in the user's time zone.",
        },
    },
    "required": ["prompt"],
}


@dataclass(frozen=True, slots=True)
class ScheduleRequest:
    """What the model asked for: ``prompt`` run ``kind`` ``when``."""

    prompt: str
    kind: When
    when: str


MakeJob = Callable[[ScheduleRequest, ToolContext], Awaitable[str]]
"""Make the job in the context's chat for its speaker; what to tell the model (made, or
why not)."""


def schedule_tool(make: MakeJob) -> Tool:
    spec = ToolSpec(
        name="schedule",
        description="Schedule a reminder or recurring task: at the time given, you get "
        "'prompt' and your answer is sent to this chat. Give exactly one of at, every, cron.",
        parameters=PARAMETERS,
        risk="dangerous",
    )

    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        request = parse(args)
        if isinstance(request, str):
            return ToolResult(request, is_error=True)
        return ToolResult(await make(request, ctx))

    return Tool(spec=spec, handler=handler)


def parse(args: dict[str, Any]) -> ScheduleRequest | str:
    """The request, or what is wrong with the arguments."""
    prompt = args.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return "schedule needs a non-empty 'prompt'"
    kinds: tuple[When, ...] = ("at", "every", "cron")
    given = [(k, v) for k in kinds if isinstance(v := args.get(k), str) and v.strip()]
    if len(given) != 1:
        return "schedule needs exactly one of 'at', 'every' or 'cron'"
    kind, when = given[0]
    return ScheduleRequest(prompt.strip(), kind, str(when).strip())
