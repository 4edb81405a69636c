"""The approval registry: ask a person, wait for one answer, remember it.

:class:`Approvals` implements :class:`core.approver.ApprovalGate`. One ``ask`` is one
:class:`~core.approver.ApprovalRequest` with its own unguessable id (``secrets``; 16 URL-safe
characters, so ``"ap:<id>:a"`` fits a 64-byte Telegram callback payload). Its life::

    ask ─► persisted (pending) ─► approver.present ─┬─ resolve(id) by requester/approver
                                                    ├─ timeout          → timed_out
                                                    ├─ token cancelled  → cancelled (at once)
                                                    └─ present() failed → denied (logged)
        ─► outcome persisted (compare-and-set) ─► approver.settle(request, decision)
                                                  (in a tracked task; the turn goes on)

Rules:

* only the requester (``request.requested_by``) or a configured approver of the session
  may resolve; when a request has no requester, only configured approvers may;
* exactly once: the first valid press wins (the claim is synchronous); later presses get
  ``already_decided`` — also for ids of requests that ended before (read from the store),
  except those a restart cancelled (:meth:`Approvals.end_orphans`, resolved by
  :data:`RESTART_BY`): a press on such a card gets ``cancelled_by_restart``;
* a request whose ``present`` fails is denied: nobody saw it, so nobody approved it;
* "always for this session": an approval with ``always=True`` is remembered
  (:class:`core.approval_memory.ApprovalMemory`: exact tool and normalised arguments, per
  session — its key and id —, bounded); a later identical request of the same session is
  approved without asking (it is still persisted, resolved by ``"always"``). A new session
  under the key remembers nothing, wherever its ``/new`` ran; :meth:`Approvals.forget`
  drops a session's memory (``/new``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from core.approval_memory import ApprovalMemory
from core.approver import ApprovalRequest, Approver, Decision, RequestKind
from core.cancellation import CancellationToken, Cancelled
from core.per_key import PerKey, per_key
from core.store.base import ApprovalRecord, Store
from core.tasks import TaskSet
from core.types import ApprovalState

logger = logging.getLogger(__name__)

ResolveResult = Literal[
    "resolved", "already_decided", "cancelled_by_restart", "unknown", "forbidden", "invalid"
]
"""``invalid``: a choice that is not one of the request's options; ``cancelled_by_restart``:
the request was left pending by an earlier run and cancelled when this one started."""

ResolveOutcome = Literal["approved", "denied"]

ID_BYTES = 12
ALWAYS_BY = "always"
RESTART_BY = "restart"
"""``resolved_by`` of a request an earlier run left pending, cancelled at start-up."""
SETTLE_SECONDS = 5.0
"""Time box for storing the outcome after the asking task was cancelled, and for
presenters still settling their cards at ``aclose``."""


@dataclass(slots=True)
class _Pending:
    request: ApprovalRequest
    future: asyncio.Future[Decision] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    concluding: bool = False


class Approvals:
    def __init__(
        self,
        store: Store,
        approver: Approver | None,
        *,
        timeout: PerKey[float] = 300.0,
        approvers: PerKey[frozenset[str]] = frozenset(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._approver = approver
        self._timeout_for: Callable[[str], float] = per_key(timeout)
        self._approvers: Callable[[str], frozenset[str]] = per_key(approvers)
        self._clock = clock
        self._pending: dict[str, _Pending] = {}
        self._always = ApprovalMemory()
        self._settling = TaskSet(logger)

    # asking ------------------------------------------------------------------------
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
    ) -> Decision:
        """Ask and wait; see the module docstring for every way this ends."""
        request = ApprovalRequest(
            id=secrets.token_urlsafe(ID_BYTES),
            kind=kind,
            session_key=session_key,
            session_id=session_id,
            turn_id=turn_id,
            call_id=call_id,
            tool=tool,
            arguments=arguments,
            prompt=prompt,
            requested_by=requested_by,
            created_at=self._clock(),
            timeout=self._timeout_for(session_key),
            choices=choices,
        )
        if token.cancelled:
            return Decision("cancelled")
        if kind == "approval" and self._always.approves(request):
            return await self._auto_approve(request)
        return await self._run(request, token)

    async def _run(self, request: ApprovalRequest, token: CancellationToken) -> Decision:
        if not await self._create(request):
            return Decision("denied", note="the request could not be recorded")
        pending = _Pending(request)
        self._pending[request.id] = pending
        try:
            decision = await self._present_and_wait(pending, token)
            pending.concluding = True
            await self._conclude(request, decision)
        except asyncio.CancelledError:
            # The asking task itself was cancelled: end the request as cancelled, time-boxed.
            decision = _claim(pending, Decision("cancelled", request_id=request.id))
            if not pending.concluding:
                await _time_boxed(self._conclude(request, decision))
            raise
        finally:
            # Removed only after the outcome is stored: a press meanwhile is already_decided.
            del self._pending[request.id]
        return decision

    async def _create(self, request: ApprovalRequest) -> bool:
        try:
            await self._store.create_approval(_record(request))
        except Exception:
            logger.exception("approval %s could not be stored; denied", request.id)
            return False
        return True

    async def _present_and_wait(self, pending: _Pending, token: CancellationToken) -> Decision:
        ended = await self._present(pending.request, token)
        if ended is not None:
            return _claim(pending, ended)
        return await _wait(pending, token)

    async def _present(self, request: ApprovalRequest, token: CancellationToken) -> Decision | None:
        """Show the request; a decision when that already ends it (cancelled, or denied)."""
        if token.cancelled:
            return Decision("cancelled", request_id=request.id)
        if self._approver is None:
            logger.error("approval %s: no approver is attached; denied", request.id)
            return _unseen(request)
        try:
            # Guarded: /stop must not wait for a slow chat platform to show the card.
            await token.guard(self._approver.present(request))
        except Cancelled:
            return Decision("cancelled", request_id=request.id)
        except Exception:
            logger.exception("approval %s could not be presented; denied", request.id)
            return _unseen(request)
        return None

    async def _conclude(self, request: ApprovalRequest, decision: Decision) -> None:
        await self._persist(request, decision)
        if decision.always and decision.outcome == "approved":
            self._always.remember(request)
        self._settle(request, decision)

    async def _persist(self, request: ApprovalRequest, decision: Decision) -> None:
        try:
            won = await self._store.resolve_approval(request.id, decision.outcome, decision.by)
        except Exception:
            logger.exception("approval %s: outcome %s not stored", request.id, decision.outcome)
            return
        if not won and not await self._stored_as(request.id, decision):
            logger.warning("approval %s was already resolved in the store", request.id)

    async def _stored_as(self, approval_id: str, decision: Decision) -> bool:
        """Whether the store already holds exactly ``decision`` (another process decided it
        and woke this one: docs/cluster.md), which is no conflict."""
        try:
            stored = await self._store.get_approval(approval_id)
        except Exception:
            return False
        return stored is not None and (stored.state, stored.resolved_by) == (
            decision.outcome,
            decision.by,
        )

    def _settle(self, request: ApprovalRequest, decision: Decision) -> None:
        """Let the presenter update its card in a tracked task: the turn does not wait."""
        if self._approver is None:
            return
        settling = self._approver.settle(request, decision)
        self._settling.spawn(settling, name=f"approval-settle:{request.id}")

    async def aclose(self) -> None:
        """Wait (time-boxed) for presenters to finish settling their cards."""
        await self._settling.aclose(SETTLE_SECONDS)

    # resolving ---------------------------------------------------------------------
    async def resolve(
        self,
        approval_id: str,
        outcome: ResolveOutcome,
        by: str,
        *,
        choice: str | None = None,
        always: bool = False,
        note: str | None = None,
    ) -> ResolveResult:
        """Answer a pending request by id; the first valid answer wins."""
        pending = self._pending.get(approval_id)
        if pending is None:
            return await self._resolve_missing(approval_id)
        request = pending.request
        if not self._may_resolve(request, by):
            return "forbidden"
        if pending.future.done():
            return "already_decided"
        if outcome == "approved" and request.kind == "choice" and choice not in request.choices:
            return "invalid"
        decision = Decision(outcome, by, choice, always, note, request_id=approval_id)
        _claim(pending, decision)
        return "resolved"

    async def _resolve_missing(self, approval_id: str) -> ResolveResult:
        try:
            record = await self._store.get_approval(approval_id)
        except Exception:
            logger.exception("approval %s could not be looked up", approval_id)
            return "unknown"
        if record is None or record.state == "pending":
            return "unknown"
        if record.state == "cancelled" and record.resolved_by == RESTART_BY:
            return "cancelled_by_restart"
        return "already_decided"

    def _may_resolve(self, request: ApprovalRequest, by: str) -> bool:
        if request.requested_by is not None and by == request.requested_by:
            return True
        return by in self.approvers_of(request.session_key)

    def approvers_of(self, session_key: str) -> frozenset[str]:
        return self._approvers(session_key)

    # queries -----------------------------------------------------------------------
    def pending(self, session_key: str | None = None) -> list[ApprovalRequest]:
        """Requests still waiting, oldest first (optionally of one session key)."""
        requests = [p.request for p in self._pending.values() if not p.future.done()]
        if session_key is not None:
            requests = [r for r in requests if r.session_key == session_key]
        return sorted(requests, key=lambda r: r.created_at)

    def get(self, approval_id: str) -> ApprovalRequest | None:
        pending = self._pending.get(approval_id)
        return None if pending is None else pending.request

    async def end_orphans(self) -> list[ApprovalRecord]:
        """At start-up: requests an earlier run left pending become ``cancelled``.

        Their asking turn is gone, so no answer could be acted on; they are resolved by
        :data:`RESTART_BY`, so a later press says so. Returns them (their cards, if any, are
        still showing buttons). A request whose turn is still ``running`` is left alone:
        with several processes on one store (docs/cluster.md) that turn runs in a live
        process, which answers it (the start's ``fail_running_turns`` has failed every turn
        no live process runs).
        """
        ended = []
        for record in await self._store.pending_approvals():
            if record.id in self._pending or await self._turn_running(record.turn_id):
                continue
            if await self._store.resolve_approval(record.id, "cancelled", RESTART_BY):
                ended.append(record)
        return ended

    async def _turn_running(self, turn_id: str) -> bool:
        turn = await self._store.get_turn(turn_id)
        return turn is not None and turn.status == "running"

    # "always for this session" -----------------------------------------------------
    def forget(self, session_key: str) -> None:
        """Drop the session's "always" approvals (e.g. on ``/new``)."""
        self._always.forget(session_key)

    async def _auto_approve(self, request: ApprovalRequest) -> Decision:
        decision = Decision("approved", by=ALWAYS_BY, always=True, request_id=request.id)
        if not await self._create(request):
            return replace(decision, request_id=None)
        await self._persist(request, decision)
        return decision


def _unseen(request: ApprovalRequest) -> Decision:
    note = "the request could not be shown to anyone"
    return Decision("denied", note=note, request_id=request.id)


def _claim(pending: _Pending, decision: Decision) -> Decision:
    """Set the outcome unless someone already did; return the outcome that stands."""
    if not pending.future.done():
        pending.future.set_result(decision)
    return pending.future.result()


async def _wait(pending: _Pending, token: CancellationToken) -> Decision:
    stop = asyncio.ensure_future(token.wait())
    waiting: set[asyncio.Future[Any]] = {pending.future, stop}
    try:
        await asyncio.wait(
            waiting,
            timeout=pending.request.timeout,
            return_when=asyncio.FIRST_COMPLETED,
        )
    finally:
        stop.cancel()
    if pending.future.done():
        return pending.future.result()
    outcome: ApprovalState = "cancelled" if token.cancelled else "timed_out"
    return _claim(pending, Decision(outcome, request_id=pending.request.id))


async def _time_boxed(work: Coroutine[Any, Any, None]) -> None:
    try:
        await asyncio.wait_for(work, timeout=SETTLE_SECONDS)
    except Exception:
        logger.exception("ending a cancelled approval failed")


def _record(request: ApprovalRequest) -> ApprovalRecord:
    return ApprovalRecord(
        id=request.id,
        session_id=request.session_id,
        session_key=request.session_key,
        turn_id=request.turn_id,
        tool=request.tool,
        arguments=json.dumps(request.arguments, default=str),
        prompt=request.prompt,
        requested_at=request.created_at,
        requested_by=request.requested_by,
    )
