"""What a turn is doing right now, for the chat's streamed answer (docs/architecture.md §13).

The engine's step callback reports a tool step once it has finished; a stream that shows
the steps (:mod:`gateway.turns.streaming`, a Telegram draft with its Stop) must show the turn's
*first* step while it runs, and a card waiting for a person. :class:`RunningSteps` tells
the turn's :class:`~gateway.turns.progress.ProgressView` (found by session key, None when the
session has no turn with a chat here):

* as each tool call starts — a ``pre_tool_call`` observer (priority 0, returns None: it
  decides nothing), :meth:`ProgressView.tool_started`;
* once an approval or choice card was sent — :meth:`ProgressView.waiting_for_person`, so
  a draft the card dismissed is drawn again at once with the waiting line — and once it
  was answered — :meth:`ProgressView.person_answered` (the running tool's line again):
  the :class:`~core.approver.Approver` the approvals registry uses, wrapped
  (:meth:`RunningSteps.approver`).

Nothing here waits for the chat: each call only hands a line to the stream's writer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.approver import ApprovalRequest, Approver, Decision
from core.hooks.registry import HookRegistry
from gateway.turns.progress import ProgressView

ViewOf = Callable[[str], ProgressView | None]
"""The running turn's progress view of a session (None: none)."""


class RunningSteps:
    """Feeds the running turns' views what starts and what waits (module docstring)."""

    def __init__(self, view_of: ViewOf) -> None:
        self._view_of = view_of

    def observe(self, hooks: HookRegistry) -> None:
        """Register the ``pre_tool_call`` observer on ``hooks``."""
        hooks.register("pre_tool_call", self._tool_started, priority=0, source=__name__)

    def approver(self, cards: Approver) -> Approver:
        """``cards``, also telling the turn's view when a card is shown and answered."""
        return _ShownApprover(cards, self._view_of)

    def _tool_started(
        self, *, session_key: str, tool_name: str, arguments: object = None, **_: Any
    ) -> None:
        view = self._view_of(session_key)
        if view is not None:
            view.tool_started(tool_name, arguments)


class _ShownApprover:
    """An :class:`Approver` that also tells the session's view about its cards."""

    def __init__(self, cards: Approver, view_of: ViewOf) -> None:
        self._cards, self._view_of = cards, view_of

    async def present(self, request: ApprovalRequest) -> None:
        await self._cards.present(request)
        view = self._view_of(request.session_key)
        if view is not None:
            view.waiting_for_person(request.kind, request.tool)

    async def settle(self, request: ApprovalRequest, decision: Decision) -> None:
        view = self._view_of(request.session_key)
        if view is not None:
            view.person_answered()
        await self._cards.settle(request, decision)
