"""The approval port: how the engine asks a person, and how the answer comes back.

The engine's approval registry (``core.approvals.Approvals``) creates an
``ApprovalRequest`` with an unguessable id, persists it, and hands it to an ``Approver``
(chat buttons, the dashboard, ...) to *present*. Whoever presents it resolves it later by
id through ``Approvals.resolve`` — exactly once. When the request ends for any reason
(decided, timed out, cancelled by ``/stop``), ``settle`` is called so the presenter can
edit its card to show the outcome and remove the buttons.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from core.cancellation import CancellationToken
from core.types import ApprovalState

RequestKind = Literal["approval", "choice"]


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    id: str
    kind: RequestKind
    session_key: str
    session_id: str
    turn_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    prompt: str
    requested_by: str | None
    created_at: float
    timeout: float
    choices: tuple[str, ...] = ()
    """For ``kind == "choice"`` (the ``clarify`` tool): the options offered."""


@dataclass(frozen=True, slots=True)
class Decision:
    outcome: ApprovalState
    by: str | None = None
    choice: str | None = None
    always: bool = False
    """Approved "always for this session": later identical requests skip the question."""
    note: str | None = field(default=None)
    """Optional reason (``/deny <id> <reason>``)."""
    request_id: str | None = None
    """The id of the request this decides (set by ``Approvals``; stored with the tool call)."""


class Approver(Protocol):
    """Presents approval requests to people. Implemented by the gateway."""

    async def present(self, request: ApprovalRequest) -> None:
        """Show the request (e.g. a card with buttons). Must not wait for the answer."""
        ...

    async def settle(self, request: ApprovalRequest, decision: Decision) -> None:
        """The request ended: show the outcome and who decided; remove the buttons."""
        ...


class ApprovalGate(Protocol):
    """What the turn loop calls to ask a person (implemented by ``core.approvals.Approvals``).

    Returns once the request is decided, timed out, or ``token`` is cancelled (then the
    outcome is ``cancelled`` and the presenter's card is settled at once).
    """

    async def ask(
        self,
        *,
        kind: RequestKind,
        session_key: str,
        session_id: str,
        turn_id: str,
        call_id: str,
        tool: str,
        arguments: dict[str, Any],
        prompt: str,
        requested_by: str | None,
        token: CancellationToken,
        choices: tuple[str, ...] = (),
    ) -> Decision: ...
