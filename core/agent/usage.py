"""What each model call spends, and the quota asked before it is made (``docs/turn-loop.md`` §4).

The engine does not count or price anything itself: a :class:`UsageMeter` (the gateway's,
:mod:`gateway.control.usage.meter`) is given to the agent, and
:class:`core.agent.model_call.ModelCaller`
asks it before every model call — the loop's iterations, the grace call, compaction
summaries (in a turn or by ``/compact``) and a child agent's calls alike — and tells it
after each call what the call spent. No meter: nothing is asked or told.

``admit`` (asked only of a meter that is ``limited``: some quota is set) raises
:class:`QuotaReached` when the call must not start: the model server then
receives no request, and the turn ends ``quota_exceeded`` with the exception's text as its
reply. A call already under way always finishes (and is recorded); the quota stops the
next one.

When the server said nothing of its tokens, :func:`estimated_usage` estimates them (the
request's size as :func:`core.agent.context.raw_estimate` counts it, the answer's bytes) and
marks the figures ``estimated``; a reply whose server counted them is recorded as it came.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Protocol

from core.agent.context import BYTES_PER_TOKEN, raw_estimate
from core.agent.scope import TurnScope
from core.model.base import ModelRequest
from core.types import ModelReply, Usage


class QuotaReached(Exception):
    """A call would start over a quota; ``reply`` says which and when it resets."""

    def __init__(self, reply: str) -> None:
        super().__init__(reply)
        self.reply = reply


@dataclass(frozen=True, slots=True)
class ModelSpend:
    """One model call's figures, and whose call it was."""

    scope: TurnScope
    model: str
    """The model the call asked for (the client's ``model``)."""
    usage: Usage


class UsageMeter(Protocol):
    """The gateway's accounting of model calls (one per profile)."""

    @property
    def limited(self) -> bool:
        """Whether :meth:`admit` can refuse a call (a quota is set); when not, it is not
        asked."""
        ...

    async def admit(self, scope: TurnScope) -> None:
        """Return when a call of ``scope`` may start; raise :class:`QuotaReached` when not."""
        ...

    async def record(self, spend: ModelSpend) -> None:
        """Keep what a finished call spent (never raises for a store problem)."""
        ...


def estimated_usage(request: ModelRequest, reply: ModelReply) -> Usage:
    """The usage of a reply whose server reported none: estimated from the request and the
    answer, and marked ``estimated``."""
    prompt = request.estimated
    if prompt is None:
        prompt = raw_estimate(request.messages, request.tools)
    answer = len((reply.content or "").encode()) + sum(
        len(call.name) + len(call.arguments.encode()) for call in reply.tool_calls
    )
    completion = math.ceil(answer / BYTES_PER_TOKEN)
    return replace(reply.usage, prompt_tokens=prompt, completion_tokens=completion, estimated=True)
