"""The ``delegate`` tool: hand a sub-task to a child agent and return its reply.

The child runs through ``ToolContext.run_child`` with a *child* of the turn's token, so
``/stop`` on the parent stops the child too (its cancellation propagates as
:class:`~core.cancellation.Cancelled`). The child shares the parent's iteration budget
(that is the loop's business, not this tool's).
"""

from __future__ import annotations

from typing import Any

from core.tools.base import Tool, ToolContext, ToolResult
from core.types import ToolSpec

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "description": "A self-contained task for a helper agent; include all context.",
        }
    },
    "required": ["task"],
}


def delegate_tool() -> Tool:
    spec = ToolSpec(
        name="delegate",
        description="Give a self-contained sub-task to a helper agent and get its answer.",
        parameters=PARAMETERS,
        risk="moderate",
    )
    return Tool(spec=spec, handler=_delegate)


async def _delegate(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    task = args.get("task")
    if not isinstance(task, str) or not task.strip():
        return ToolResult("delegate needs a non-empty 'task' string", is_error=True)
    if ctx.run_child is None:
        return ToolResult("delegate is not available here (no child agents)", is_error=True)
    reply = await ctx.run_child(task, ctx.token.child())
    return ToolResult(reply)
