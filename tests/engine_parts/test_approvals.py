"""The approval registry against a real SQLite store and an Approver written here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.approvals import Approvals
from core.approver import ApprovalRequest, Decision, RequestKind
from core.cancellation import CancellationToken
from core.store.base import ApprovalRecord
from core.store.sqlite import SqliteStore
from tests.engine_parts.conftest import TurnRef

WAIT = 2.0


class CardApprover:
    """Presents by remembering the request; settles by remembering the outcome."""

    def __init__(self, *, broken: bool = False, hangs: bool = False) -> None:
        self.presented: asyncio.Queue[ApprovalRequest] = asyncio.Queue()
        self.settled: asyncio.Queue[tuple[ApprovalRequest, Decision]] = asyncio.Queue()
        self.broken, self.hangs = broken, hangs

    async def present(self, request: ApprovalRequest) -> None:
        if self.broken:
            raise ConnectionError("chat unreachable")
        self.presented.put_nowait(request)
        if self.hangs:
            await asyncio.Event().wait()  # a platform that never answers the send

    async def settle(self, request: ApprovalRequest, decision: Decision) -> None:
        self.settled.put_nowait((request, decision))

    async def next_presented(self) -> ApprovalRequest:
        return await asyncio.wait_for(self.presented.get(), WAIT)

    async def next_settled(self) -> tuple[ApprovalRequest, Decision]:
        return await asyncio.wait_for(self.settled.get(), WAIT)


@pytest.fixture
def approver() -> CardApprover:
    return CardApprover()


@pytest.fixture
async def approvals(store: SqliteStore, approver: CardApprover) -> AsyncIterator[Approvals]:
    registry = Approvals(store, approver, timeout=60.0, approvers=frozenset({"admin"}))
    yield registry
    await registry.aclose()


def ask(
    approvals: Approvals,
    turn: TurnRef,
    token: CancellationToken | None = None,
    *,
    kind: RequestKind = "approval",
    command: str = "rm -rf build",
    requested_by: str | None = "alice",
    choices: tuple[str, ...] = (),
) -> asyncio.Task[Decision]:
    arguments: dict[str, Any] = {"command": command}
    return asyncio.create_task(
        approvals.ask(
            kind=kind,
            session_key=turn.session_key,
            session_id=turn.session_id,
            turn_id=turn.turn_id,
            call_id="call-1",
            tool="terminal",
            arguments=arguments,
            prompt=f"Run {command}?",
            requested_by=requested_by,
            token=token or CancellationToken(),
            choices=choices,
        )
    )


async def test_requester_approval_is_returned_persisted_and_settled(
    approvals: Approvals, approver: CardApprover, store: SqliteStore, turn: TurnRef
):
    asking = ask(approvals, turn)
    request = await approver.next_presented()
    assert await approvals.resolve(request.id, "approved", "alice") == "resolved"
    decision = await asyncio.wait_for(asking, WAIT)
    assert (decision.outcome, decision.by) == ("approved", "alice")
    assert decision.request_id == request.id
    record = await store.get_approval(request.id)
    assert record is not None
    assert (record.state, record.resolved_by, record.requested_by) == ("approved", "alice", "alice")
    assert await approver.next_settled() == (request, decision)


async def test_denial_carries_its_note_and_is_persisted(
    approvals: Approvals, approver: CardApprover, store: SqliteStore, turn: TurnRef
):
    asking = ask(approvals, turn)
    request = await approver.next_presented()
    await approvals.resolve(request.id, "denied", "alice", note="not today")
    decision = await asyncio.wait_for(asking, WAIT)
    assert (decision.outcome, decision.note) == ("denied", "not today")
    record = await store.get_approval(request.id)
    assert record is not None and record.state == "denied"


async def test_an_unanswered_request_times_out(
    store: SqliteStore, approver: CardApprover, turn: TurnRef
):
    approvals = Approvals(store, approver, timeout=0.1)
    decision = await asyncio.wait_for(ask(approvals, turn), WAIT)
    assert decision.outcome == "timed_out"
    request, settled = await approver.next_settled()
    assert settled.outcome == "timed_out"
    record = await store.get_approval(request.id)
    assert record is not None and record.state == "timed_out"


async def test_cancelling_the_token_ends_a_pending_request_at_once_as_cancelled(
    approvals: Approvals, approver: CardApprover, store: SqliteStore, turn: TurnRef
):
    token = CancellationToken()
    asking = ask(approvals, turn, token)
    request = await approver.next_presented()
    token.cancel("cancelled")
    decision = await asyncio.wait_for(asking, 1.0)
    assert decision.outcome == "cancelled"
    assert (await approver.next_settled())[1].outcome == "cancelled"
    record = await store.get_approval(request.id)
    assert record is not None and record.state == "cancelled"
    assert await approvals.resolve(request.id, "approved", "alice") == "already_decided"


async def test_cancelling_the_token_while_presenting_does_not_wait_for_the_platform(
    store: SqliteStore, turn: TurnRef
):
    approver = CardApprover(hangs=True)
    approvals = Approvals(store, approver, timeout=60.0)
    token = CancellationToken()
    asking = ask(approvals, turn, token)
    request = await approver.next_presented()
    token.cancel("cancelled")
    assert (await asyncio.wait_for(asking, 1.0)).outcome == "cancelled"
    record = await store.get_approval(request.id)
    assert record is not None and record.state == "cancelled"
    await approvals.aclose()


async def test_cancelling_the_asking_task_stores_the_request_as_cancelled(
    approvals: Approvals, approver: CardApprover, store: SqliteStore, turn: TurnRef
):
    asking = ask(approvals, turn)
    request = await approver.next_presented()
    asking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asking
    record = await store.get_approval(request.id)
    assert record is not None and record.state == "cancelled"


async def test_a_stranger_cannot_resolve_and_nothing_changes(
    approvals: Approvals, approver: CardApprover, store: SqliteStore, turn: TurnRef
):
    asking = ask(approvals, turn)
    request = await approver.next_presented()
    assert await approvals.resolve(request.id, "approved", "mallory") == "forbidden"
    assert approvals.pending(turn.session_key) == [request]
    record = await store.get_approval(request.id)
    assert record is not None and record.state == "pending"
    assert not asking.done()
    await approvals.resolve(request.id, "denied", "alice")
    await asking


async def test_a_configured_approver_may_resolve_someone_elses_request(
    approvals: Approvals, approver: CardApprover, turn: TurnRef
):
    asking = ask(approvals, turn)
    request = await approver.next_presented()
    assert await approvals.resolve(request.id, "approved", "admin") == "resolved"
    assert (await asking).by == "admin"


async def test_a_request_without_requester_is_only_for_configured_approvers(
    approvals: Approvals, approver: CardApprover, turn: TurnRef
):
    asking = ask(approvals, turn, requested_by=None)
    request = await approver.next_presented()
    assert await approvals.resolve(request.id, "approved", "alice") == "forbidden"
    assert await approvals.resolve(request.id, "approved", "admin") == "resolved"
    await asking


async def test_a_second_press_is_already_decided(
    approvals: Approvals, approver: CardApprover, turn: TurnRef
):
    asking = ask(approvals, turn)
    request = await approver.next_presented()
    assert await approvals.resolve(request.id, "approved", "alice") == "resolved"
    assert await approvals.resolve(request.id, "denied", "admin") == "already_decided"
    assert (await asking).outcome == "approved"
    assert await approvals.resolve(request.id, "denied", "admin") == "already_decided"


async def test_concurrent_presses_resolve_exactly_once(
    approvals: Approvals, approver: CardApprover, turn: TurnRef
):
    asking = ask(approvals, turn)
    request = await approver.next_presented()
    presses = [
        approvals.resolve(request.id, "approved" if i % 2 else "denied", "admin") for i in range(10)
    ]
    results = await asyncio.gather(*presses)
    assert results.count("resolved") == 1
    assert results.count("already_decided") == 9
    assert (await asking).outcome == "denied"


async def test_an_unknown_id_is_reported_unknown(approvals: Approvals):
    assert await approvals.resolve("no-such-id", "approved", "admin") == "unknown"


async def test_a_request_that_cannot_be_presented_is_denied_and_logged(
    store: SqliteStore, turn: TurnRef, caplog: pytest.LogCaptureFixture
):
    approvals = Approvals(store, CardApprover(broken=True), timeout=60.0)
    decision = await asyncio.wait_for(ask(approvals, turn), WAIT)
    assert decision.outcome == "denied"
    assert "could not be presented" in caplog.text
    assert await store.pending_approvals(turn.session_key) == []


async def test_pending_lists_a_sessions_waiting_requests_oldest_first(
    approvals: Approvals, approver: CardApprover, turn: TurnRef
):
    first = ask(approvals, turn, command="rm -rf a")
    first_request = await approver.next_presented()
    second = ask(approvals, turn, command="rm -rf b")
    second_request = await approver.next_presented()
    assert approvals.pending(turn.session_key) == [first_request, second_request]
    assert approvals.pending("other:key") == []
    for request in (first_request, second_request):
        await approvals.resolve(request.id, "denied", "alice")
    await asyncio.gather(first, second)
    assert approvals.pending(turn.session_key) == []


async def test_always_approves_the_same_command_later_without_asking(
    approvals: Approvals, approver: CardApprover, turn: TurnRef
):
    asking = ask(approvals, turn, command="rm -rf build")
    request = await approver.next_presented()
    await approvals.resolve(request.id, "approved", "alice", always=True)
    await asking
    again = await asyncio.wait_for(ask(approvals, turn, command="rm   -rf  build"), WAIT)
    assert (again.outcome, again.by) == ("approved", "always")
    other = ask(approvals, turn, command="rm -rf /")
    assert (await approver.next_presented()).arguments == {"command": "rm -rf /"}
    other.cancel()
    await asyncio.gather(other, return_exceptions=True)


async def test_forget_drops_the_sessions_always_approvals(
    approvals: Approvals, approver: CardApprover, turn: TurnRef
):
    asking = ask(approvals, turn)
    await approvals.resolve((await approver.next_presented()).id, "approved", "alice", always=True)
    await asking
    approvals.forget(turn.session_key)
    again = ask(approvals, turn)
    await approver.next_presented()
    again.cancel()
    await asyncio.gather(again, return_exceptions=True)


async def test_a_choice_request_returns_the_chosen_option(
    approvals: Approvals, approver: CardApprover, turn: TurnRef
):
    asking = ask(approvals, turn, kind="choice", choices=("red", "blue"))
    request = await approver.next_presented()
    assert request.choices == ("red", "blue")
    assert await approvals.resolve(request.id, "approved", "alice", choice="green") == "invalid"
    assert await approvals.resolve(request.id, "approved", "alice", choice="blue") == "resolved"
    assert (await asking).choice == "blue"


async def test_ids_are_distinct_and_fit_a_telegram_callback_payload(
    approvals: Approvals, approver: CardApprover, turn: TurnRef
):
    tasks = [ask(approvals, turn, command=f"rm -rf d{i}") for i in range(20)]
    ids = {(await approver.next_presented()).id for _ in tasks}
    assert len(ids) == 20
    assert all(len(f"ap:{i}:a".encode()) <= 64 and len(i) >= 16 for i in ids)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_requests_left_pending_by_an_earlier_run_end_as_cancelled(
    approvals: Approvals, approver: CardApprover, store: SqliteStore, turn: TurnRef
):
    orphan = ApprovalRecord(
        id="left-over",
        session_id=turn.session_id,
        session_key=turn.session_key,
        turn_id=turn.turn_id,
        tool="terminal",
        arguments="{}",
        prompt="Run?",
        requested_at=1.0,
    )
    await store.create_approval(orphan)
    live = ask(approvals, turn)
    request = await approver.next_presented()
    await store.fail_running_turns("gateway restarted")  # as the service's start does
    assert [r.id for r in await approvals.end_orphans()] == [orphan.id]
    record = await store.get_approval("left-over")
    assert record is not None and record.state == "cancelled"
    assert [r.id for r in await store.pending_approvals()] == [request.id]
    await approvals.resolve(request.id, "denied", "alice")
    await live
