"""What the SQLite store keeps: sessions, messages, turns, tool calls, approvals, inbound.

Every test works on a real SQLite file under ``tmp_path``.
"""

from __future__ import annotations

import asyncio

import pytest

from core.store.base import (
    ApprovalRecord,
    InboundRecord,
    SessionRecord,
    Store,
    StoreError,
    ToolCallRecord,
    TurnRecord,
)
from core.types import ApprovalState, ChatMessage, ToolCall
from tests.support.store_backends import scalar


@pytest.fixture
def store(any_store: Store) -> Store:
    """Each test of this module runs on SQLite and on PostgreSQL."""
    return any_store


async def session_with_turn(
    store: Store, key: str = "telegram:42", turn_id: str = "t1"
) -> tuple[SessionRecord, TurnRecord]:
    session = await store.create_session(key, "default")
    return session, await store.start_turn(session.id, turn_id)


def approval(
    approval_id: str, session: SessionRecord, turn_id: str, requested_at: float
) -> ApprovalRecord:
    return ApprovalRecord(
        id=approval_id,
        session_id=session.id,
        session_key=session.key,
        turn_id=turn_id,
        tool="terminal",
        arguments='{"command": "ls"}',
        prompt="Run ls?",
        requested_at=requested_at,
        requested_by="alice",
    )


def inbound(update_id: str, received_at: float, platform: str = "telegram") -> InboundRecord:
    return InboundRecord(platform, update_id, "telegram:42", f'{{"u": "{update_id}"}}', received_at)


# sessions -------------------------------------------------------------------
async def test_the_open_session_is_read_with_its_active_messages_oldest_first(
    store: Store,
) -> None:
    assert await store.load_active_session("telegram:42") is None  # none open yet
    session, _ = await session_with_turn(store)
    ids = [
        await store.append_message(session.id, "t1", ChatMessage("user", text))
        for text in ("first", "compacted away", "last")
    ]
    await store.deactivate_messages([ids[1]])
    await store.end_session((await store.create_session("telegram:7", "default")).id)

    found = await store.load_active_session("telegram:42")
    assert found is not None
    assert found.session.id == session.id
    assert [(m.id, m.message.content) for m in found.messages] == [
        (ids[0], "first"),
        (ids[2], "last"),
    ]
    assert await store.load_active_session("telegram:7") is None  # ended: not open
    await store.end_session(session.id)
    assert await store.load_active_session("telegram:42") is None


async def test_ended_session_makes_room_for_a_new_one(store: Store) -> None:
    first = await store.create_session("telegram:42", "default")
    assert await store.get_active_session("telegram:42") == first

    await store.end_session(first.id)
    assert await store.get_active_session("telegram:42") is None

    second = await store.create_session("telegram:42", "coder")
    assert second.id != first.id
    assert await store.get_active_session("telegram:42") == second


async def test_second_open_session_for_a_key_is_refused(store: Store) -> None:
    first = await store.create_session("telegram:42", "default")

    with pytest.raises(StoreError, match="cannot create a session for key 'telegram:42'"):
        await store.create_session("telegram:42", "default")

    assert await store.get_active_session("telegram:42") == first


async def test_touch_and_saved_prompt_are_kept(store: Store) -> None:
    session = await store.create_session("k", "default")

    await store.touch_session(session.id)
    await store.save_session_prompt(
        session.id, frozen_context="ctx", system_prompt="You are…", fingerprint="abc123"
    )

    active = await store.get_active_session("k")
    assert active is not None
    assert active.last_active_at >= session.last_active_at
    assert (active.frozen_context, active.system_prompt, active.prompt_fingerprint) == (
        "ctx",
        "You are…",
        "abc123",
    )


async def test_updating_an_unknown_session_is_an_error(store: Store) -> None:
    with pytest.raises(StoreError, match="no session 'ghost'"):
        await store.touch_session("ghost")
    with pytest.raises(StoreError, match="no session 'ghost'"):
        await store.end_session("ghost")


# messages -------------------------------------------------------------------
MESSAGES = [
    ChatMessage(role="system", content="be brief"),
    ChatMessage(role="user", content=[{"type": "text", "text": "hi"}, {"type": "image_url"}]),
    ChatMessage(role="user", content='[{"type": "text", "text": "a str that looks like JSON"}]'),
    ChatMessage(
        role="assistant",
        content=None,
        tool_calls=(
            ToolCall(id="c1", name="terminal", arguments='{"command": "ls"}'),
            ToolCall(id="c2", name="read_file", arguments="{}"),
        ),
    ),
    ChatMessage(role="tool", content="a.txt", tool_call_id="c1", name="terminal"),
    ChatMessage(role="assistant", content=""),
]


async def test_messages_round_trip_in_order(store: Store) -> None:
    session, turn = await session_with_turn(store)
    other = await store.create_session("other", "default")
    await store.append_message(other.id, None, ChatMessage("user", "elsewhere"))

    ids = [await store.append_message(session.id, turn.id, m) for m in MESSAGES]

    loaded = await store.load_active_messages(session.id)
    assert [m.message for m in loaded] == MESSAGES
    assert [m.id for m in loaded] == ids
    assert ids == sorted(ids)
    assert {(m.session_id, m.turn_id, m.active) for m in loaded} == {(session.id, turn.id, True)}


async def test_update_message_content_replaces_it(store: Store) -> None:
    session = await store.create_session("k", "default")
    message = ChatMessage("tool", [{"type": "text", "text": "old"}], tool_call_id="c1")
    message_id = await store.append_message(session.id, None, message)

    await store.update_message_content(message_id, "old\n[steer] also check b.txt")

    [loaded] = await store.load_active_messages(session.id)
    assert loaded.message.content == "old\n[steer] also check b.txt"
    assert loaded.message.tool_call_id == "c1"
    with pytest.raises(StoreError, match="no message 9999"):
        await store.update_message_content(9999, "x")


async def test_update_message_content_keeps_list_content_as_blocks(store: Store) -> None:
    session = await store.create_session("k", "default")
    message = ChatMessage("tool", "plain", tool_call_id="c1")
    message_id = await store.append_message(session.id, None, message)
    blocks = [{"type": "image_url", "image_url": {"url": "u"}}, {"type": "text", "text": "x"}]

    await store.update_message_content(message_id, blocks)

    [loaded] = await store.load_active_messages(session.id)
    assert loaded.message.content == blocks


async def test_deactivated_messages_are_not_loaded_but_kept(store: Store) -> None:
    session = await store.create_session("k", "default")
    ids = [
        await store.append_message(session.id, None, ChatMessage("user", str(i))) for i in range(5)
    ]

    await store.deactivate_messages(ids[:3])
    await store.deactivate_messages([])

    assert [m.message.content for m in await store.load_active_messages(session.id)] == ["3", "4"]
    assert await scalar(store, "SELECT COUNT(*) FROM messages WHERE active = 0") == 3


# turns ----------------------------------------------------------------------
async def test_turn_is_started_finished_and_listed(store: Store) -> None:
    session, started = await session_with_turn(store)
    second = await store.start_turn(session.id, "t2")
    assert started.status == "running"
    assert await store.get_turn("t1") == started

    await store.finish_turn(
        "t1", status="failed", exit_reason="model_error", iterations=3, error="HTTP 500"
    )

    finished = await store.get_turn("t1")
    assert finished is not None
    assert (finished.status, finished.exit_reason, finished.iterations, finished.error) == (
        "failed",
        "model_error",
        3,
        "HTTP 500",
    )
    assert finished.finished_at is not None
    assert finished.finished_at >= started.started_at
    assert [t.id for t in await store.list_turns(session.id)] == ["t1", second.id]
    assert await store.get_turn("missing") is None


async def test_a_turn_closed_with_its_session_touches_it_at_the_same_moment(
    store: Store,
) -> None:
    """``finish_turn`` given the session: the turn's status and the session's last activity
    are one write, at one moment (core/store/base.py, ``Store.finish_turn``)."""
    session, _ = await session_with_turn(store)

    await store.finish_turn(
        "t1", status="completed", exit_reason="text_response", iterations=1, session_id=session.id
    )

    finished, active = await store.get_turn("t1"), await store.get_active_session(session.key)
    assert finished is not None and active is not None
    assert finished.status == "completed"
    assert active.last_active_at == finished.finished_at
    assert active.last_active_at >= session.last_active_at


async def test_a_turn_closed_with_a_missing_session_keeps_nothing(store: Store) -> None:
    """Both or neither: the session's update refused, the turn stays running."""
    session, started = await session_with_turn(store)

    with pytest.raises(StoreError, match="no session 'ghost'"):
        await store.finish_turn(
            "t1", status="completed", exit_reason="text_response", iterations=1, session_id="ghost"
        )
    with pytest.raises(StoreError, match="no turn 'missing'"):
        await store.finish_turn(
            "missing", status="completed", exit_reason="text_response", iterations=1,
            session_id=session.id,
        )  # fmt: skip

    assert await store.get_turn("t1") == started
    assert await store.get_active_session(session.key) == session
    await store.finish_turn("t1", status="failed", exit_reason="crashed", iterations=0)
    assert (await store.get_turn("t1") or started).status == "failed"  # no transaction left open


async def test_fail_running_turns_marks_only_running_ones(store: Store) -> None:
    session, _ = await session_with_turn(store)
    await store.start_turn(session.id, "t2")
    await store.start_turn(session.id, "t3")
    await store.finish_turn("t3", status="completed", exit_reason="text_response", iterations=1)

    assert await store.fail_running_turns("gateway restarted") == 2

    turns = {t.id: t for t in await store.list_turns(session.id)}
    assert {t.id for t in turns.values() if t.status == "failed"} == {"t1", "t2"}
    assert turns["t1"].exit_reason == "crashed"
    assert turns["t1"].error == "gateway restarted"
    assert turns["t3"].status == "completed"
    assert await store.fail_running_turns("again") == 0


# tool calls and approvals ---------------------------------------------------
async def test_tool_calls_are_listed_with_approval_outcome(store: Store) -> None:
    session, turn = await session_with_turn(store)
    calls = [
        ToolCallRecord("c1", turn.id, session.id, "terminal", '{"command": "rm x"}', "denied",
                       True, 10.0, 11.0, approval_id="a1", approval_outcome="denied"),
        ToolCallRecord("c1", turn.id, session.id, "read_file", "{}", "text", False, 12.0, 12.5),
    ]  # fmt: skip
    for call in calls:
        await store.record_tool_call(call)

    assert await store.list_tool_calls(turn.id) == calls
    assert await store.list_tool_calls("other") == []


async def test_resolve_approval_succeeds_once_for_concurrent_resolvers(
    store: Store,
) -> None:
    session, turn = await session_with_turn(store)
    await store.create_approval(approval("a1", session, turn.id, 100.0))
    outcomes: list[tuple[ApprovalState, str]] = [("approved", "alice"), ("denied", "bob")]

    results = await asyncio.gather(
        *(store.resolve_approval("a1", state, by) for state, by in outcomes)
    )

    assert sorted(results) == [False, True]
    winner_state, winner = outcomes[results.index(True)]
    stored = await store.get_approval("a1")
    assert stored is not None
    assert (stored.state, stored.resolved_by) == (winner_state, winner)
    assert stored.resolved_at is not None
    assert await store.resolve_approval("a1", "timed_out", None) is False
    assert await store.resolve_approval("unknown", "approved", "alice") is False


async def test_pending_approvals_are_oldest_first_and_filtered_by_key(
    store: Store,
) -> None:
    first, turn1 = await session_with_turn(store, "telegram:1", "t1")
    second, turn2 = await session_with_turn(store, "slack:2", "t2")
    await store.create_approval(approval("late", first, turn1.id, 300.0))
    await store.create_approval(approval("early", second, turn2.id, 100.0))
    await store.create_approval(approval("middle", first, turn1.id, 200.0))
    await store.create_approval(approval("done", first, turn1.id, 50.0))
    await store.resolve_approval("done", "approved", "alice")

    assert [a.id for a in await store.pending_approvals()] == ["early", "middle", "late"]
    assert [a.id for a in await store.pending_approvals("telegram:1")] == ["middle", "late"]
    assert await store.get_approval("early") == approval("early", second, turn2.id, 100.0)


async def test_duplicate_approval_id_is_refused(store: Store) -> None:
    session, turn = await session_with_turn(store)
    await store.create_approval(approval("a1", session, turn.id, 1.0))

    with pytest.raises(StoreError, match="cannot create approval 'a1'"):
        await store.create_approval(approval("a1", session, turn.id, 2.0))


async def test_resolving_to_pending_is_a_caller_error(store: Store) -> None:
    session, turn = await session_with_turn(store)
    await store.create_approval(approval("a1", session, turn.id, 1.0))

    with pytest.raises(ValueError, match="cannot be resolved to 'pending'"):
        await store.resolve_approval("a1", "pending", "alice")

    assert [a.id for a in await store.pending_approvals()] == ["a1"]


# inbound queue --------------------------------------------------------------
async def test_enqueue_inbound_is_idempotent(store: Store) -> None:
    assert await store.enqueue_inbound(inbound("u1", 1.0)) is True
    replay = InboundRecord("telegram", "u1", "telegram:42", "changed", 2.0)

    assert await store.enqueue_inbound(replay) is False
    assert await store.get_inbound("telegram", "u1") == inbound("u1", 1.0)
    assert await store.enqueue_inbound(inbound("u1", 3.0, platform="slack")) is True


async def test_unfinished_inbound_lists_pending_and_processing_oldest_first(
    store: Store,
) -> None:
    for update_id, received_at in [("u3", 3.0), ("u1", 1.0), ("u2", 2.0), ("u4", 4.0)]:
        await store.enqueue_inbound(inbound(update_id, received_at))
    await store.enqueue_inbound(inbound("s1", 0.5, platform="slack"))

    await store.set_inbound_state("telegram", "u1", "processing")
    await store.set_inbound_state("telegram", "u2", "done")
    await store.set_inbound_state("telegram", "u4", "failed")

    unfinished = await store.unfinished_inbound("telegram")
    assert [(i.update_id, i.state) for i in unfinished] == [("u1", "processing"), ("u3", "pending")]
    with pytest.raises(StoreError, match="no inbound item telegram/u9"):
        await store.set_inbound_state("telegram", "u9", "done")
