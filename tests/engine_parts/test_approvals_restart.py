"""Requests a restart cancelled tell a late answer so, unlike requests that were decided."""

from __future__ import annotations

import asyncio

from core.approvals import RESTART_BY, Approvals
from core.cancellation import CancellationToken
from core.store.base import ApprovalRecord
from core.store.sqlite import SqliteStore
from tests.engine_parts.conftest import TurnRef
from tests.engine_parts.test_approvals import CardApprover, ask


async def left_pending(store: SqliteStore, turn: TurnRef, approval_id: str) -> None:
    record = ApprovalRecord(
        approval_id, turn.session_id, turn.session_key, turn.turn_id, "terminal", "{}", "?", 1.0
    )
    await store.create_approval(record)


async def test_a_request_an_earlier_run_left_pending_answers_cancelled_by_restart(
    store: SqliteStore, turn: TurnRef
) -> None:
    await left_pending(store, turn, "old-1")
    approvals = Approvals(store, CardApprover(), approvers=frozenset({"admin"}))
    await store.fail_running_turns("gateway restarted")  # as the service's start does

    [ended] = await approvals.end_orphans()

    assert ended.id == "old-1"
    stored = await store.get_approval("old-1")
    assert stored is not None and (stored.state, stored.resolved_by) == ("cancelled", RESTART_BY)
    assert await approvals.resolve("old-1", "approved", "admin") == "cancelled_by_restart"
    assert await approvals.resolve("old-1", "denied", "alice") == "cancelled_by_restart"


async def test_a_request_whose_turn_still_runs_is_left_to_the_process_running_it(
    store: SqliteStore, turn: TurnRef
) -> None:
    """Several processes on one store: a turn left ``running`` by the start's
    ``fail_running_turns`` is a live process's, and so is its approval."""
    await left_pending(store, turn, "theirs")
    approvals = Approvals(store, CardApprover(), approvers=frozenset({"admin"}))

    assert await approvals.end_orphans() == []
    stored = await store.get_approval("theirs")
    assert stored is not None and stored.state == "pending"


async def test_a_request_cancelled_by_stop_is_still_already_decided(
    store: SqliteStore, turn: TurnRef
) -> None:
    approver = CardApprover()
    approvals = Approvals(store, approver, approvers=frozenset({"admin"}))
    token = CancellationToken()
    asking = ask(approvals, turn, token)
    request = await approver.next_presented()

    token.cancel("stop")
    decision = await asyncio.wait_for(asking, 2)
    await approvals.aclose()

    assert decision.outcome == "cancelled"
    assert await approvals.resolve(request.id, "approved", "admin") == "already_decided"
