"""The slow notice is about silence (``docs/turn-loop.md`` §4, "The slow notice"): a stream
that keeps flowing past ``slow_notice_seconds`` gets none; a silent first byte gets one that
says the call waits (not retrying), a retry then says it retries, and when the answer
flows the notice is withdrawn (:class:`ModelSlowEnded`)."""

from __future__ import annotations

import asyncio
import sys
from types import FrameType

from core.agent.control import TurnControl
from core.agent.loop import CommonAgent
from core.agent.step import ModelSlow, ModelSlowEnded, TurnNotice
from core.agent.turn import UserMessage
from core.model.retry import RetryPolicy
from tests.engine.conftest import KEY, USER, Rig
from tests.support.model_server import reply_error, reply_hang, reply_text

NOTICE_AFTER = 0.3
WORDS = [f"w{n} " for n in range(16)]


class Notices:
    def __init__(self) -> None:
        self.seen: list[TurnNotice] = []
        self.changed = asyncio.Event()

    def __call__(self, notice: TurnNotice) -> None:
        self.seen.append(notice)
        self.changed.set()

    async def wait_for(self, count: int) -> None:
        for _ in range(200):
            if len(self.seen) >= count:
                return
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 5)
        raise AssertionError(f"only {len(self.seen)} notices")


def streaming_agent(rig: Rig, max_attempts: int) -> CommonAgent:
    policy = RetryPolicy(
        max_attempts=max_attempts, base_delay=0.0, slow_notice_seconds=NOTICE_AFTER
    )
    rig.agent(stream=True)  # the rig's profile, streaming
    return CommonAgent(
        rig.store, rig.client, rig.tools, rig.hooks, rig.approvals, rig.profile,
        clock=rig.clock, retry=policy,
    )  # fmt: skip


async def test_a_stream_flowing_past_the_notice_delay_gets_no_notice(rig: Rig) -> None:
    rig.server.script(reply_text("".join(WORDS), chunks=WORDS, gap=0.05))  # ~0.9 s in all
    notices = Notices()
    agent = streaming_agent(rig, max_attempts=1)
    message = UserMessage("hi", sender_id=USER)

    result = await agent.run_turn(KEY, message, TurnControl(), on_notice=notices)

    assert result.reply == "".join(WORDS)
    assert notices.seen == []


async def test_a_silent_first_byte_waits_then_retries_then_the_notice_is_withdrawn(
    rig: Rig,
) -> None:
    first, second = asyncio.Event(), asyncio.Event()
    rig.server.script(
        reply_hang(reply_error(503, "Loading model", type="unavailable_error"), until=first),
        reply_hang(reply_text("".join(WORDS[:4]), chunks=WORDS[:4]), until=second),
    )
    notices = Notices()
    agent = streaming_agent(rig, max_attempts=3)
    message = UserMessage("hi", sender_id=USER)
    turn = asyncio.create_task(agent.run_turn(KEY, message, TurnControl(), on_notice=notices))

    await notices.wait_for(1)
    waiting = notices.seen[0]
    assert isinstance(waiting, ModelSlow)
    assert (waiting.attempt, waiting.retrying, waiting.last_error) == (1, False, None)
    assert waiting.waited >= NOTICE_AFTER
    first.set()  # the first attempt fails: the retry is under way at once
    await notices.wait_for(2)
    retrying = notices.seen[1]
    assert isinstance(retrying, ModelSlow)
    assert (retrying.attempt, retrying.max_attempts, retrying.retrying) == (2, 3, True)
    assert retrying.last_error == "server: 503"
    second.set()  # the answer flows
    result = await asyncio.wait_for(turn, 5)

    assert result.reply == "".join(WORDS[:4])
    assert notices.seen[2:] == [ModelSlowEnded(1)]


async def test_a_stream_that_stalls_mid_answer_gets_the_notice(rig: Rig) -> None:
    release = asyncio.Event()
    rig.server.script(
        reply_text("".join(WORDS[:6]), chunks=WORDS[:6], stall_after=3, until=release)
    )
    notices = Notices()
    agent = streaming_agent(rig, max_attempts=1)
    message = UserMessage("hi", sender_id=USER)
    turn = asyncio.create_task(agent.run_turn(KEY, message, TurnControl(), on_notice=notices))

    await notices.wait_for(1)
    release.set()
    result = await asyncio.wait_for(turn, 5)

    [stalled, ended] = notices.seen
    assert isinstance(stalled, ModelSlow) and not stalled.retrying
    assert ended == ModelSlowEnded(1)
    assert result.reply == "".join(WORDS[:6])


async def test_a_call_that_answers_in_time_starts_no_watching_task(rig: Rig) -> None:
    """Until the first silence the watch is a timer: no task is made for a call that
    answers before ``slow_notice_seconds`` (30 s here, far beyond any answer)."""
    rig.server.script(reply_text("Hello."))
    policy = RetryPolicy(max_attempts=1, slow_notice_seconds=30.0)
    agent = CommonAgent(
        rig.store, rig.client, rig.tools, rig.hooks, rig.approvals, rig.profile,
        clock=rig.clock, retry=policy,
    )  # fmt: skip
    notices = Notices()
    entered: list[str] = []

    def profile(frame: FrameType, event: str, _: object) -> None:
        if event == "call" and frame.f_code.co_filename.endswith("core/agent/slow_notice.py"):
            entered.append(frame.f_code.co_qualname)

    sys.setprofile(profile)
    try:
        result = await agent.run_turn(
            KEY, UserMessage("hi", sender_id=USER), TurnControl(), on_notice=notices
        )
    finally:
        sys.setprofile(None)

    assert result.reply == "Hello." and notices.seen == []
    assert "SilenceWatch.start" in entered and "SilenceWatch.stop" in entered
    assert "SilenceWatch.run" not in entered
