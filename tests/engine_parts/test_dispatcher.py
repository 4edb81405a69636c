"""The Dispatcher, driven through its port with a turn runner written here.

``ScriptedTurns`` is a RunTurn: each turn waits until the test releases it (or its token is
cancelled), so every ordering below is controlled by events, never by sleeping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field

import pytest

from core.agent.control import TurnControl
from core.agent.profile import BusyPolicy
from core.agent.turn import TurnResult, UserMessage
from core.cancellation import Cancelled
from core.dispatcher import Dispatcher, SessionStatus, StopOutcome, SubmitOutcome

WAIT = 2.0


@dataclass
class Turn:
    key: str
    message: UserMessage
    control: TurnControl
    release: asyncio.Event = field(default_factory=asyncio.Event)
    raises: Exception | None = None
    ignores_stop: bool = False


class ScriptedTurns:
    def __init__(self) -> None:
        self.started: asyncio.Queue[Turn] = asyncio.Queue()
        self.fail_next: Exception | None = None
        self.ignore_stop = False

    async def __call__(self, key: str, message: UserMessage, control: TurnControl) -> TurnResult:
        turn = Turn(key, message, control, raises=self.fail_next, ignores_stop=self.ignore_stop)
        self.fail_next = None
        self.started.put_nowait(turn)
        await _first(turn.release.wait(), *(() if turn.ignores_stop else (control.token.wait(),)))
        if turn.raises is not None:
            raise turn.raises
        if control.token.cancelled:
            reason = control.token.reason
            return _result(message, "interrupted", reply=None, error=reason)
        return _result(message, "completed", reply=f"re: {message.text}")

    async def next(self) -> Turn:
        return await asyncio.wait_for(self.started.get(), WAIT)


async def _first(*waits: Awaitable[object]) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


def _result(message: UserMessage, status: str, *, reply: str | None, error: str | None = None):
    return TurnResult(
        turn_id=f"t-{message.text}",
        session_id="s",
        status=status,  # type: ignore[arg-type]
        exit_reason="text_response" if status == "completed" else "cancelled",
        reply=reply,
        iterations=1,
        error=error,
    )


class Replies:
    def __init__(self) -> None:
        self.got: asyncio.Queue[tuple[str, str, TurnResult]] = asyncio.Queue()

    async def __call__(self, key: str, message: UserMessage, result: TurnResult) -> None:
        self.got.put_nowait((key, message.text, result))

    async def next(self) -> tuple[str, str, TurnResult]:
        return await asyncio.wait_for(self.got.get(), WAIT)


@pytest.fixture
def turns() -> ScriptedTurns:
    return ScriptedTurns()


@pytest.fixture
def replies() -> Replies:
    return Replies()


def _dispatcher(
    turns: ScriptedTurns, replies: Replies, policy: BusyPolicy = "queue", **kwargs: object
) -> Dispatcher:
    return Dispatcher(turns, policy_for=policy, on_result=replies, **kwargs)  # type: ignore[arg-type]


def msg(text: str) -> UserMessage:
    return UserMessage(text=text, sender_id="u1")


async def test_submit_returns_before_the_turn_finishes(turns: ScriptedTurns, replies: Replies):
    dispatcher = _dispatcher(turns, replies)
    outcome = dispatcher.submit("k", msg("hello"))
    assert outcome == SubmitOutcome("started")
    turn = await turns.next()
    assert replies.got.empty()
    turn.release.set()
    assert await replies.next() == (
        "k",
        "hello",
        _result(msg("hello"), "completed", reply="re: hello"),
    )


async def test_second_message_waits_and_runs_as_its_own_turn_in_order(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies)
    dispatcher.submit("k", msg("one"))
    first = await turns.next()
    assert dispatcher.submit("k", msg("two")) == SubmitOutcome("queued", 1)
    assert dispatcher.submit("k", msg("three")) == SubmitOutcome("queued", 2)
    assert turns.started.empty()
    first.release.set()
    assert (await replies.next())[1] == "one"
    second = await turns.next()
    assert second.message.text == "two"
    second.release.set()
    (await turns.next()).release.set()
    assert [(await replies.next())[1] for _ in range(2)] == ["two", "three"]


async def test_queue_rejects_messages_beyond_the_limit(turns: ScriptedTurns, replies: Replies):
    dispatcher = _dispatcher(turns, replies, queue_limit=1)
    dispatcher.submit("k", msg("one"))
    await turns.next()
    assert dispatcher.submit("k", msg("two")).kind == "queued"
    assert dispatcher.submit("k", msg("three")) == SubmitOutcome("rejected_queue_full")
    assert dispatcher.status("k").queue_length == 1


async def test_interrupt_policy_stops_the_running_turn_and_runs_the_new_message_next(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies, "interrupt")
    dispatcher.submit("k", msg("long job"))
    running = await turns.next()
    outcome = dispatcher.submit("k", msg("actually, stop"))
    assert outcome == SubmitOutcome("interrupted_and_queued", 1)
    assert running.control.token.reason == "interrupted_by_user"
    _, text, result = await replies.next()
    assert (text, result.status) == ("long job", "interrupted")
    assert (await turns.next()).message.text == "actually, stop"


async def test_steer_policy_folds_the_text_into_the_running_turn(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies, "steer")
    dispatcher.submit("k", msg("write a poem"))
    running = await turns.next()
    assert dispatcher.submit("k", msg("make it rhyme")) == SubmitOutcome("steered")
    assert running.control.drain_steer() == "make it rhyme"
    running.release.set()
    await dispatcher.wait_idle("k")
    assert turns.started.empty()


async def test_a_message_for_a_turn_that_is_stopping_is_queued_not_steered(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies, "steer")
    dispatcher.submit("k", msg("one"))
    running = await turns.next()
    dispatcher.stop("k")
    assert dispatcher.submit("k", msg("two")) == SubmitOutcome("queued", 1)
    assert dispatcher.steer("k", "too late") is False
    assert running.control.drain_steer() is None
    assert (await turns.next()).message.text == "two"


async def test_policy_is_chosen_per_session_key(turns: ScriptedTurns, replies: Replies):
    policies: dict[str, BusyPolicy] = {"a": "steer", "b": "queue"}
    dispatcher = Dispatcher(turns, policy_for=policies.__getitem__, on_result=replies)
    dispatcher.submit("a", msg("a1"))
    dispatcher.submit("b", msg("b1"))
    await turns.next()
    await turns.next()
    assert dispatcher.submit("a", msg("a2")).kind == "steered"
    assert dispatcher.submit("b", msg("b2")).kind == "queued"


async def test_stop_cancels_the_running_turn_and_drops_the_queue(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies)
    dispatcher.submit("k", msg("one"))
    running = await turns.next()
    dispatcher.submit("k", msg("two"))
    dispatcher.submit("k", msg("three"))
    assert dispatcher.stop("k") == StopOutcome(stopped=True, dropped=2)
    assert running.control.token.reason == "cancelled"
    assert dispatcher.status("k").queue_length == 0
    _, text, result = await replies.next()
    assert (text, result.status, result.error) == ("one", "interrupted", "cancelled")
    await dispatcher.wait_idle("k")
    assert turns.started.empty()


async def test_stop_keeps_the_queue_when_configured_to(turns: ScriptedTurns, replies: Replies):
    dispatcher = _dispatcher(turns, replies, stop_clears_queue=False)
    dispatcher.submit("k", msg("one"))
    await turns.next()
    dispatcher.submit("k", msg("two"))
    assert dispatcher.stop("k") == StopOutcome(stopped=True, kept=1)
    assert (await turns.next()).message.text == "two"


async def test_stop_clears_the_queue_per_key_as_configured(turns: ScriptedTurns, replies: Replies):
    dispatcher = _dispatcher(turns, replies, stop_clears_queue=lambda key: key == "clears")
    for key in ("clears", "keeps"):
        dispatcher.submit(key, msg(f"{key} one"))
        await turns.next()
        dispatcher.submit(key, msg(f"{key} two"))
    assert dispatcher.stop("clears") == StopOutcome(stopped=True, dropped=1)
    assert dispatcher.stop("keeps") == StopOutcome(stopped=True, kept=1)
    assert (await turns.next()).message.text == "keeps two"
    await dispatcher.wait_idle("clears")
    assert turns.started.empty()


def test_a_stop_outcome_is_true_when_a_turn_stopped_or_messages_were_dropped() -> None:
    assert not StopOutcome() and not StopOutcome(kept=2)
    assert StopOutcome(stopped=True) and StopOutcome(dropped=1)


async def test_stop_on_an_idle_key_reports_nothing_stopped(turns: ScriptedTurns, replies: Replies):
    dispatcher = _dispatcher(turns, replies)
    assert dispatcher.stop("k") == StopOutcome()
    assert dispatcher.steer("k", "x") is False
    assert dispatcher.redirect("k", "x") is False


async def test_steer_and_redirect_reach_the_running_turn_at_once(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies)
    dispatcher.submit("k", msg("one"))
    running = await turns.next()
    dispatcher.submit("k", msg("queued behind"))
    assert dispatcher.steer("k", "also check tests") is True
    assert dispatcher.redirect("k", "use python 3.12") is True
    assert running.control.drain_steer() == "also check tests"
    assert running.control.drain_redirect() == "use python 3.12"


async def test_status_reports_the_running_turn_and_queue(turns: ScriptedTurns, replies: Replies):
    dispatcher = Dispatcher(turns, on_result=replies, clock=lambda: 1234.5)
    assert dispatcher.status("k") == SessionStatus(running=False)
    dispatcher.submit("k", msg("one"))
    running = await turns.next()
    dispatcher.submit("k", msg("two"))
    assert dispatcher.status("k") == SessionStatus(True, 1234.5, 1, None, "u1")
    running.control.turn_id = "turn-42"  # what the loop does once the turn is stored
    assert dispatcher.status("k") == SessionStatus(True, 1234.5, 1, "turn-42", "u1")


async def test_a_turn_that_raises_releases_the_session_and_the_next_message_runs(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies)
    turns.fail_next = RuntimeError("model exploded")
    dispatcher.submit("k", msg("one"))
    crashing = await turns.next()
    dispatcher.submit("k", msg("two"))
    crashing.release.set()
    _, text, result = await replies.next()
    assert (text, result.status, result.exit_reason) == ("one", "failed", "crashed")
    assert result.error == "RuntimeError: model exploded"
    assert (await turns.next()).message.text == "two"


async def test_a_failing_result_observer_is_logged_and_the_next_turn_runs(
    turns: ScriptedTurns, caplog: pytest.LogCaptureFixture
):
    async def broken(key: str, message: UserMessage, result: TurnResult) -> None:
        raise ConnectionError("platform down")

    dispatcher = Dispatcher(turns, on_result=broken)
    dispatcher.submit("k", msg("one"))
    first = await turns.next()
    dispatcher.submit("k", msg("two"))
    first.release.set()
    assert (await turns.next()).message.text == "two"
    assert "on_result for k failed" in caplog.text


async def test_per_key_state_is_evicted_when_the_session_goes_idle(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies)
    for key in ("a", "b"):
        dispatcher.submit(key, msg(key))
        dispatcher.submit(key, msg(key + "2"))
    assert dispatcher.busy_keys == {"a", "b"}
    for _ in range(4):
        (await turns.next()).release.set()
    await dispatcher.wait_idle("a")
    await dispatcher.wait_idle("b")
    assert dispatcher.busy_keys == frozenset()
    assert dispatcher.worker_count == 0
    assert dispatcher.status("a") == SessionStatus(running=False)


async def test_different_sessions_run_at_the_same_time(turns: ScriptedTurns, replies: Replies):
    dispatcher = _dispatcher(turns, replies)
    dispatcher.submit("a", msg("a"))
    dispatcher.submit("b", msg("b"))
    both = {(await turns.next()).key, (await turns.next()).key}
    assert both == {"a", "b"}


async def test_aclose_stops_running_turns_with_reason_shutdown(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies)
    dispatcher.submit("k", msg("one"))
    running = await turns.next()
    dispatcher.submit("k", msg("never runs"))
    await dispatcher.aclose()
    assert running.control.token.reason == "shutdown"
    assert dispatcher.worker_count == 0
    assert turns.started.empty()
    assert dispatcher.submit("k", msg("late")) == SubmitOutcome("rejected_shutting_down")


async def test_aclose_cancels_a_turn_that_ignores_the_stop(turns: ScriptedTurns, replies: Replies):
    turns.ignore_stop = True
    dispatcher = _dispatcher(turns, replies)
    dispatcher.submit("k", msg("stubborn"))
    await turns.next()
    await dispatcher.aclose(grace=0.05)
    assert dispatcher.worker_count == 0
    assert dispatcher.busy_keys == frozenset()


async def test_wait_idle_on_an_unknown_key_returns_at_once(turns: ScriptedTurns, replies: Replies):
    dispatcher = _dispatcher(turns, replies)
    await asyncio.wait_for(dispatcher.wait_idle("nobody"), WAIT)
    assert dispatcher.busy_keys == frozenset()


async def test_a_turn_that_raises_cancelled_is_reported_interrupted(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies)
    turns.fail_next = Cancelled("cancelled")
    dispatcher.submit("k", msg("one"))
    (await turns.next()).release.set()
    _, _, result = await replies.next()
    assert (result.status, result.exit_reason) == ("interrupted", "cancelled")


async def test_an_interrupter_runs_ahead_of_messages_queued_with_queue(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies, "interrupt")
    dispatcher.submit("k", msg("long job"))
    running = await turns.next()
    dispatcher.submit("k", msg("backlog"), policy="queue")

    outcome = dispatcher.submit("k", msg("urgent"))

    assert outcome == SubmitOutcome("interrupted_and_queued", 1)
    assert running.control.token.reason == "interrupted_by_user"
    nxt = await turns.next()
    assert nxt.message.text == "urgent"
    nxt.release.set()
    assert (await turns.next()).message.text == "backlog"


async def test_interrupters_still_waiting_keep_their_arrival_order(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies, "interrupt")
    turns.ignore_stop = True  # the running turn keeps running, so both interrupters wait
    dispatcher.submit("k", msg("long job"))
    running = await turns.next()
    turns.ignore_stop = False
    dispatcher.submit("k", msg("backlog"), policy="queue")
    dispatcher.submit("k", msg("first"))
    assert dispatcher.submit("k", msg("second")) == SubmitOutcome("queued", 2)

    running.release.set()
    order = []
    for _ in range(3):
        turn = await turns.next()
        order.append(turn.message.text)
        turn.release.set()
    assert order == ["first", "second", "backlog"]


async def test_a_steer_the_turn_never_delivered_runs_next_from_the_same_sender(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies)
    dispatcher.submit("k", UserMessage("hello", sender_id="u1", sender_name="Ann"))
    running = await turns.next()
    dispatcher.submit("k", msg("backlog"))
    assert dispatcher.steer("k", "in metric")
    assert dispatcher.redirect("k", "no, in French")

    running.release.set()

    nxt = await turns.next()
    assert nxt.message == UserMessage("no, in French\nin metric", "u1", "Ann")


async def test_a_steer_left_by_a_stopped_turn_is_dropped_with_the_queue(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies)
    dispatcher.submit("k", msg("hello"))
    await turns.next()
    dispatcher.steer("k", "in metric")

    assert dispatcher.stop("k")

    await asyncio.wait_for(dispatcher.wait_idle("k"), WAIT)
    assert turns.started.empty()


# handled: how each submitted message ended (what an inbox's receipt follows) -----------
async def handled(outcome: SubmitOutcome) -> bool:
    assert outcome.handled is not None
    return await asyncio.wait_for(asyncio.shield(outcome.handled), WAIT)


async def test_handled_is_true_only_after_on_result_returned(turns: ScriptedTurns):
    observed: list[str] = []
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow_observer(key: str, message: UserMessage, result: TurnResult) -> None:
        entered.set()
        await release.wait()
        observed.append(message.text)

    dispatcher = Dispatcher(turns, on_result=slow_observer)  # type: ignore[arg-type]
    outcome = dispatcher.submit("k", msg("hello"))
    (await turns.next()).release.set()
    await asyncio.wait_for(entered.wait(), WAIT)
    assert outcome.handled is not None and not outcome.handled.done()
    release.set()
    assert await handled(outcome) is True
    assert observed == ["hello"]


async def test_folded_and_refused_messages_are_handled_at_once(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies, policy="steer", queue_limit=0)
    dispatcher.submit("k", msg("write a poem"))
    await turns.next()
    steered = dispatcher.submit("k", msg("make it rhyme"))
    full = dispatcher.submit("k", msg("and another"), policy="queue")
    assert (steered.kind, full.kind) == ("steered", "rejected_queue_full")
    assert steered.handled is not None and steered.handled.done()
    assert (await handled(steered), await handled(full)) == (True, True)


async def test_a_message_dropped_by_stop_is_handled_for_good(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies)
    first = dispatcher.submit("k", msg("one"))
    await turns.next()
    queued = dispatcher.submit("k", msg("two"))
    assert dispatcher.stop("k") == StopOutcome(stopped=True, dropped=1)
    assert (await handled(queued), await handled(first)) == (True, True)


async def test_a_shutdown_leaves_running_queued_and_late_messages_unhandled(
    turns: ScriptedTurns, replies: Replies
):
    dispatcher = _dispatcher(turns, replies)
    running = dispatcher.submit("k", msg("one"))
    await turns.next()
    queued = dispatcher.submit("k", msg("two"))
    await dispatcher.aclose()
    late = dispatcher.submit("k", msg("late"))
    assert [await handled(o) for o in (running, queued, late)] == [False, False, False]


async def test_a_turn_cancelled_at_shutdown_is_unhandled(turns: ScriptedTurns, replies: Replies):
    turns.ignore_stop = True
    dispatcher = _dispatcher(turns, replies)
    stubborn = dispatcher.submit("k", msg("stubborn"))
    await turns.next()
    await dispatcher.aclose(grace=0.05)
    assert await handled(stubborn) is False


async def test_an_on_result_that_raises_leaves_the_message_unhandled(turns: ScriptedTurns):
    async def broken_delivery(key: str, message: UserMessage, result: TurnResult) -> None:
        raise RuntimeError("send failed")

    dispatcher = Dispatcher(turns, on_result=broken_delivery)  # type: ignore[arg-type]
    outcome = dispatcher.submit("k", msg("hello"))
    (await turns.next()).release.set()
    assert await handled(outcome) is False
