"""Debounce (``debounce_ms``): rapid text messages from one person become one turn.

Time is a :class:`~tests.support.manual_clock.ManualClock`: the Dispatcher's window
sleeps on it and only the test moves it, so "100 ms apart" and "500 ms window" cost no
real time; turns are released by events (the ``ScriptedTurns`` of the dispatcher tests)."""

from __future__ import annotations

import asyncio

from core.agent.turn import UserMessage
from core.attachments import Attachment
from core.debounce import Pace
from core.dispatcher import Dispatcher, SubmitOutcome
from core.store.sqlite import SqliteStore
from core.types import ChatMessage
from tests.engine_parts.test_dispatcher import WAIT, Replies, ScriptedTurns
from tests.support.manual_clock import ManualClock

WINDOW = 0.5


def _dispatcher(
    turns: ScriptedTurns, replies: Replies, clock: ManualClock, **kwargs: object
) -> Dispatcher:
    return Dispatcher(
        turns,
        on_result=replies,
        debounce_pace=Pace(clock.now, clock.sleep),
        debounce=WINDOW,
        **kwargs,  # type: ignore[arg-type]
    )


def text(body: str, sender: str = "u1", n: int = 0) -> UserMessage:
    return UserMessage(body, sender_id=sender, origin=f"telegram:{n or body}")


async def _three(dispatcher: Dispatcher, clock: ManualClock) -> list[SubmitOutcome]:
    outcomes = [dispatcher.submit("k", text("a", n=1), merge=True)]
    for n, body in ((2, "b"), (3, "c")):
        await clock.advance(0.1)
        outcomes.append(dispatcher.submit("k", text(body, n=n), merge=True))
    return outcomes


async def test_three_messages_100ms_apart_are_one_turn_holding_all_three() -> None:
    turns, replies, clock = ScriptedTurns(), Replies(), ManualClock()
    dispatcher = _dispatcher(turns, replies, clock)
    outcomes = await _three(dispatcher, clock)
    assert [o.kind for o in outcomes] == ["started", "merged", "merged"]
    await clock.advance(0.4)
    assert turns.started.empty()  # the window ends 500 ms after the LAST message
    assert dispatcher.status("k").gathering == 3
    await clock.advance(0.1)
    turn = await turns.next()
    assert turn.message.text == "a\nb\nc"
    assert turn.message.origin == "telegram:1"
    assert turn.message.also == ("telegram:2", "telegram:3")
    assert not any(o.handled.done() for o in outcomes if o.handled)
    turn.release.set()
    _, said, _ = await replies.next()
    assert said == "a\nb\nc"
    assert [await asyncio.wait_for(o.handled, WAIT) for o in outcomes if o.handled] == [True] * 3
    await dispatcher.wait_idle("k")
    assert turns.started.empty()


async def test_stop_in_the_window_acts_at_once_and_drops_the_gathered_messages() -> None:
    turns, replies, clock = ScriptedTurns(), Replies(), ManualClock()
    dispatcher = _dispatcher(turns, replies, clock)
    outcomes = await _three(dispatcher, clock)
    stopped = dispatcher.stop("k")  # no clock move: never delayed by the window
    assert (stopped.stopped, stopped.dropped) == (False, 3)
    assert [o.handled.result() for o in outcomes if o.handled] == [True] * 3
    await asyncio.wait_for(dispatcher.wait_idle("k"), WAIT)
    assert turns.started.empty() and "k" not in dispatcher.busy_keys


async def test_stop_keeping_the_queue_runs_the_gathered_messages_now() -> None:
    turns, replies, clock = ScriptedTurns(), Replies(), ManualClock()
    dispatcher = _dispatcher(turns, replies, clock, stop_clears_queue=False)
    await _three(dispatcher, clock)
    assert dispatcher.stop("k").kept == 3
    turn = await turns.next()  # the clock never reached the window's end
    assert turn.message.text == "a\nb\nc"
    turn.release.set()
    await dispatcher.wait_idle("k")


async def test_a_command_or_a_forced_message_is_never_delayed() -> None:
    turns, replies, clock = ScriptedTurns(), Replies(), ManualClock()
    dispatcher = _dispatcher(turns, replies, clock)
    dispatcher.submit("k", text("/steer when idle"))  # merge=False: a command's text
    assert (await turns.next()).message.text == "/steer when idle"
    dispatcher.submit("q", text("forced"), merge=True, policy="queue")
    assert (await turns.next()).message.text == "forced"
    await dispatcher.aclose(0.5)


async def test_a_command_in_the_window_starts_the_gathered_turn_first() -> None:
    turns, replies, clock = ScriptedTurns(), Replies(), ManualClock()
    dispatcher = _dispatcher(turns, replies, clock)
    dispatcher.submit("k", text("a", n=1), merge=True)
    assert dispatcher.submit("k", text("queued"), policy="queue").kind == "queued"
    first = await turns.next()
    assert first.message.text == "a"
    first.release.set()
    second = await turns.next()
    assert second.message.text == "queued"
    second.release.set()
    await dispatcher.wait_idle("k")


async def test_another_person_closes_the_window_and_runs_after_it() -> None:
    turns, replies, clock = ScriptedTurns(), Replies(), ManualClock()
    dispatcher = _dispatcher(turns, replies, clock)
    dispatcher.submit("g", text("a", n=1), merge=True)
    dispatcher.submit("g", text("b", n=2), merge=True)
    outcome = dispatcher.submit("g", text("other", sender="u2"), merge=True)
    assert outcome.kind == "queued"
    first = await turns.next()
    assert first.message.text == "a\nb"
    first.release.set()
    second = await turns.next()
    assert (second.message.text, second.message.sender_id) == ("other", "u2")
    second.release.set()
    await dispatcher.wait_idle("g")


async def test_a_second_message_with_files_is_not_merged_and_files_keep_their_origin() -> None:
    turns, replies, clock = ScriptedTurns(), Replies(), ManualClock()
    dispatcher = _dispatcher(turns, replies, clock)
    photo = Attachment(kind="image", name="p.jpg", mime="image/jpeg", size=3)
    dispatcher.submit("k", text("look", n=1), merge=True)
    with_file = UserMessage("", sender_id="u1", origin="telegram:2", attachments=(photo,))
    assert dispatcher.submit("k", with_file, merge=True).kind == "merged"
    again = UserMessage("too", sender_id="u1", origin="telegram:3", attachments=(photo,))
    assert dispatcher.submit("k", again, merge=True).kind == "queued"
    first = await turns.next()
    assert (first.message.text, first.message.origin) == ("look", "telegram:2")
    assert first.message.also == ("telegram:1",) and first.message.attachments == (photo,)
    first.release.set()
    second = await turns.next()
    assert second.message.origin == "telegram:3"
    second.release.set()
    await dispatcher.wait_idle("k")


async def test_no_window_by_default_and_shutdown_in_the_window_replays() -> None:
    turns, replies, clock = ScriptedTurns(), Replies(), ManualClock()
    plain = Dispatcher(turns, on_result=replies)
    plain.submit("k", text("now"), merge=True)
    (await turns.next()).release.set()
    await plain.wait_idle("k")
    dispatcher = _dispatcher(turns, replies, clock)
    outcomes = await _three(dispatcher, clock)
    await asyncio.wait_for(dispatcher.aclose(0.5), WAIT)
    assert [o.handled.result() for o in outcomes if o.handled] == [False] * 3
    assert turns.started.empty()


async def test_a_replay_of_any_merged_update_finds_the_one_stored_message(
    store: SqliteStore,
) -> None:
    merged = UserMessage("a\nb", origin="telegram:1", also=("telegram:2", "telegram:12"))
    session = await store.create_session("telegram:dm:1", "default")
    await store.start_turn(session.id, "t1")
    user = ChatMessage(role="user", content="a\nb")
    stored_id = await store.append_message(
        session.id, "t1", user, origin=merged.origin, also=merged.also
    )
    for origin in ("telegram:1", "telegram:2", "telegram:12"):
        found = await store.find_message_by_origin(session.id, origin)
        assert found is not None and found.id == stored_id
    assert await store.find_message_by_origin(session.id, "telegram:") is None
    assert await store.find_message_by_origin(session.id, "telegram:3") is None
