"""The turn loop's seed regressions (issue 28 point 6), each watched by the hook recorder:
``on_session_start`` once per new session whatever fails; the compaction summary call
and the overflow re-send are model calls like any other — ``pre_api_request``/
``post_api_request``, counted by ``max_iterations`` and the review budget, the slow notice,
under a token ``/stop`` cancels (``docs/turn-loop.md`` §4); the session lock wait honours
``/stop`` (§2 step 1)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from core.agent.compaction import SUMMARY_PROMPT
from core.agent.control import TurnControl
from core.agent.loop import CommonAgent
from core.agent.step import ModelSlow
from core.agent.turn import UserMessage
from core.cancellation import Cancelled
from core.model.retry import RetryPolicy
from core.store.base import StoreError
from core.store.sqlite import SqliteStore
from core.types import ChatMessage
from tests.engine.conftest import KEY, USER, Rig
from tests.engine.test_turn_slow_notice import Notices
from tests.support.model_errors import CONTEXT_OVERFLOWS
from tests.support.model_server import (
    ReceivedRequest,
    Reply,
    reply_text,
    reply_tool_call,
)

LLAMA_OVERFLOW = CONTEXT_OVERFLOWS[0]
SUMMARY = "Summary: four numbered messages, four answers."


def is_summary(request: ReceivedRequest) -> bool:
    return bool(request.messages[0]["content"] == SUMMARY_PROMPT)


def answer(request: ReceivedRequest) -> Reply:
    return reply_text(SUMMARY) if is_summary(request) else reply_text("noted")


async def four_turns(rig: Rig, **profile: Any) -> None:
    """A session with history enough to compact (the last turns are kept whole)."""
    rig.agent(context_window=32768, **profile)
    rig.server.script(*[answer] * 4)
    for number in range(4):
        await rig.turn(f"message {number}: hello")
    rig.log.calls.clear()


def api_hooks(rig: Rig) -> list[tuple[str, int]]:
    names = ("pre_api_request", "post_api_request")
    return [(name, kwargs["iteration"]) for name, kwargs in rig.log.calls if name in names]


# on_session_start ----------------------------------------------------------------------
class FailFirstUserMessage:
    """The real store; the first user message's write fails (a full disk, say)."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner, self.failed = inner, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def append_message(self, session_id: str, turn_id: str | None, message: ChatMessage,
                             **options: Any) -> int:  # fmt: skip
        if message.role == "user" and not self.failed:
            self.failed = True
            raise StoreError("disk full")
        return int(await self.inner.append_message(session_id, turn_id, message, **options))


async def test_on_session_start_fires_once_when_the_first_message_failed_to_store(
    rig: Rig,
) -> None:
    agent = CommonAgent(
        FailFirstUserMessage(rig.store), rig.client, rig.tools, rig.hooks, rig.approvals,
        rig.profile, clock=rig.clock, retry=RetryPolicy(max_attempts=1),
    )  # fmt: skip
    rig.server.script(reply_text("hello"))

    first = await agent.run_turn(KEY, UserMessage("hi", USER), TurnControl())
    second = await agent.run_turn(KEY, UserMessage("hi again", USER), TurnControl())

    assert (first.status, second.status) == ("failed", "completed")
    assert first.session_id == second.session_id
    [started] = rig.log.of("on_session_start")
    assert started["turn_id"] == first.turn_id
    assert rig.log.names().count("on_session_end") == 2


# the summary call: hooks, counting ------------------------------------------------------
async def test_the_summary_call_and_the_re_send_are_counted_model_calls_with_hooks(
    rig: Rig,
) -> None:
    await four_turns(rig)
    rig.server.script(LLAMA_OVERFLOW.reply(), reply_text(SUMMARY), reply_text("it fits"))

    result = await rig.turn("message 4: and now?")

    assert (result.status, result.reply) == ("completed", "it fits")
    assert result.iterations == 3  # the call, the summary, the re-send
    assert api_hooks(rig) == [
        ("pre_api_request", 1),
        ("pre_api_request", 2),
        ("post_api_request", 2),
        ("pre_api_request", 3),
        ("post_api_request", 3),
    ]
    [summary_call] = [m for m in rig.log.of("pre_api_request") if m["iteration"] == 2]
    assert summary_call["messages"][0]["content"] == SUMMARY_PROMPT
    assert summary_call["turn_id"] == result.turn_id
    assert len(rig.log.of("api_request_error")) == 1  # the overflow


@pytest.mark.parametrize(
    ("scenario", "requests", "status"),
    [
        ("text", 1, "completed"),
        ("tool then grace", 2, "budget_exhausted"),
        ("overflow", 1, "budget_exhausted"),
    ],
)
async def test_max_iterations_1_makes_at_most_2_model_requests(
    rig: Rig, scenario: str, requests: int, status: str
) -> None:
    """docs/turn-loop.md §4: ``max_iterations = N`` allows N model calls — iterations,
    summary calls and re-sends — plus the one grace call after a tool batch."""
    await four_turns(rig, max_iterations=1)
    sent_before = len(rig.server.requests)
    first = {
        "text": reply_text("done"),
        "tool then grace": reply_tool_call("echo", {"text": "x"}),
        "overflow": LLAMA_OVERFLOW.reply(),
    }[scenario]
    rig.server.script(first, reply_text("grace answer"), reply_text(SUMMARY), reply_text("x"))

    result = await rig.turn("message 4: go")

    sent = rig.server.requests[sent_before:]
    assert len(sent) == requests <= 2
    assert result.status == status
    assert not any(is_summary(r) for r in sent)
    assert len(rig.log.of("pre_api_request")) == requests


async def test_a_compaction_with_no_call_left_is_skipped_and_the_request_goes_as_it_is(
    rig: Rig,
) -> None:
    rig.agent(context_window=2000, max_iterations=1)
    rig.server.script(*[answer] * 60)
    for number in range(20):
        result = await rig.turn(f"message {number}: please note {'x' * 400}")
        assert result.reply == "noted"

    assert not any(is_summary(r) for r in rig.server.requests)
    assert len(rig.server.requests) == 20
    assert [kwargs["iteration"] for kwargs in rig.log.of("pre_api_request")] == [1] * 20


async def test_the_summary_call_counts_toward_the_review_input_budget(rig: Rig) -> None:
    await four_turns(rig, review_input_budget=1000)
    rig.server.script(
        LLAMA_OVERFLOW.reply(),
        reply_text(SUMMARY, usage=(5000, 20)),
        reply_tool_call("echo", {"text": "x"}, usage=(100, 5)),
        reply_text("never asked"),
    )

    result = await rig.turn("message 4: echo x")

    assert (result.status, result.exit_reason) == ("budget_exhausted",
                                                    "review_input_budget_exhausted")  # fmt: skip
    assert result.reply is not None and "5,100 of 1,000 tokens" in result.reply
    assert rig.server.pending == 1


# under the token, with the slow notice --------------------------------------------------
async def test_a_slow_non_streamed_summary_call_gets_the_slow_notice(rig: Rig) -> None:
    await four_turns(rig)
    policy = RetryPolicy(max_attempts=1, base_delay=0.0, slow_notice_seconds=0.3)
    agent = CommonAgent(
        rig.store, rig.client, rig.tools, rig.hooks, rig.approvals, rig.profile,
        clock=rig.clock, retry=policy,
    )  # fmt: skip
    notices = Notices()
    rig.server.script(LLAMA_OVERFLOW.reply(), reply_text(SUMMARY, hold=True), reply_text("it fits"))
    turn = asyncio.create_task(
        agent.run_turn(KEY, UserMessage("message 4: go", USER), TurnControl(), on_notice=notices)
    )

    await notices.wait_for(1)
    rig.server.release()
    result = await turn

    assert result.reply == "it fits"
    [slow] = notices.seen[:1]
    assert isinstance(slow, ModelSlow) and slow.iteration == 2  # the summary call
    assert is_summary(rig.server.requests[-2])


async def test_compact_is_stopped_by_its_token_and_stores_nothing(rig: Rig) -> None:
    await four_turns(rig)
    stored_before = await rig.stored()
    rig.server.script(reply_text(SUMMARY, hold=True))
    control = TurnControl()
    compacting = asyncio.create_task(rig.agent().compact(KEY, control))
    await rig.server.wait_for_requests(5)

    control.stop()

    with pytest.raises(Cancelled):
        await compacting
    assert await rig.stored() == stored_before
    assert [name for name in rig.log.names() if "api" in name] == ["pre_api_request"]
    [pre] = rig.log.of("pre_api_request")
    assert pre["turn_id"] == "" and pre["messages"][0]["content"] == SUMMARY_PROMPT
    rig.server.release()


async def test_a_turn_waiting_behind_compact_is_stopped_at_once(rig: Rig) -> None:
    await four_turns(rig)
    rig.server.script(reply_text(SUMMARY, hold=True), reply_text("after compact"))
    compacting = asyncio.create_task(rig.agent().compact(KEY, TurnControl()))
    await rig.server.wait_for_requests(5)
    waiting = TurnControl()
    turn = asyncio.create_task(rig.turn("sent during /compact", control=waiting))
    await asyncio.sleep(0)  # the turn runs up to the session lock (no I/O before it)
    assert rig.agent().locks.waiting(KEY) == 2

    waiting.stop()
    result = await turn

    assert not compacting.done()  # the summary call is still held: the turn did not wait
    assert (result.status, result.exit_reason, result.turn_id) == ("interrupted", "cancelled", "")
    rig.server.release()
    assert (await compacting) is not None
    assert all(m.text() != "sent during /compact" for m in await rig.stored())
    assert (await rig.turn("next")).reply == "after compact"


async def test_a_slow_compact_summary_gets_the_slow_notice(rig: Rig) -> None:
    await four_turns(rig)
    policy = RetryPolicy(max_attempts=1, base_delay=0.0, slow_notice_seconds=0.3)
    agent = CommonAgent(
        rig.store, rig.client, rig.tools, rig.hooks, rig.approvals, rig.profile,
        clock=rig.clock, retry=policy,
    )  # fmt: skip
    notices = Notices()
    rig.server.script(reply_text(SUMMARY, hold=True))
    compacting = asyncio.create_task(agent.compact(KEY, TurnControl(), notices))

    await notices.wait_for(1)
    rig.server.release()

    assert await compacting is not None
    [slow] = notices.seen
    assert isinstance(slow, ModelSlow) and slow.iteration == 1
    assert [name for name in rig.log.names() if "api" in name] == [
        "pre_api_request",
        "post_api_request",
    ]
