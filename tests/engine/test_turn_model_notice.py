"""The slow-model notice as an engine event: ``on_notice`` gets one :class:`ModelSlow` when
a model call (retries included) goes ``slow_notice_seconds`` without an answer."""

from __future__ import annotations

import asyncio
from typing import Any

from core.agent.control import TurnControl
from core.agent.loop import CommonAgent
from core.agent.step import OBSERVER_SECONDS, ModelSlow, TurnNotice
from core.agent.turn import UserMessage
from core.model.retry import RetryPolicy
from tests.engine.conftest import KEY, USER, Rig
from tests.support.model_server import reply_error, reply_hang, reply_text


def agent_with(rig: Rig, policy: RetryPolicy) -> CommonAgent:
    return CommonAgent(
        rig.store, rig.client, rig.tools, rig.hooks, rig.approvals, rig.profile,
        clock=rig.clock, retry=policy,
    )  # fmt: skip


class Notices:
    def __init__(self) -> None:
        self.seen: list[TurnNotice] = []
        self.arrived = asyncio.Event()

    def __call__(self, notice: TurnNotice) -> None:
        self.seen.append(notice)
        self.arrived.set()


async def test_a_slow_model_call_gives_one_notice_with_the_attempt_and_last_error(
    rig: Rig,
) -> None:
    release = asyncio.Event()
    rig.server.script(
        reply_error(503, "overloaded", headers={"Retry-After": "0"}),
        reply_hang(reply_text("finally"), until=release),
    )
    policy = RetryPolicy(max_attempts=3, base_delay=0.0, slow_notice_seconds=0.05)
    notices = Notices()
    message = UserMessage("hi", sender_id=USER)
    turn = asyncio.create_task(
        agent_with(rig, policy).run_turn(KEY, message, TurnControl(), on_notice=notices)
    )

    await asyncio.wait_for(notices.arrived.wait(), 5)
    release.set()
    result = await asyncio.wait_for(turn, 5)

    assert (result.status, result.reply) == ("completed", "finally")
    [notice] = notices.seen
    assert isinstance(notice, ModelSlow)
    assert (notice.iteration, notice.attempt, notice.max_attempts) == (1, 2, 3)
    assert notice.last_error == "server: 503"
    assert notice.waited >= 0.05


async def test_slow_notice_seconds_zero_never_gives_a_notice(rig: Rig) -> None:
    release = asyncio.Event()
    rig.server.script(reply_hang(reply_text("late"), until=release))
    notices = Notices()
    control = TurnControl()
    agent = agent_with(rig, RetryPolicy(max_attempts=1, slow_notice_seconds=0))
    message = UserMessage("hi", sender_id=USER)
    turn = asyncio.create_task(agent.run_turn(KEY, message, control, on_notice=notices))
    await rig.server.wait_for_requests(1)

    release.set()
    result = await asyncio.wait_for(turn, 5)

    assert result.reply == "late"
    assert notices.seen == []


async def test_a_hanging_notice_callback_never_holds_the_reply(rig: Rig) -> None:
    release = asyncio.Event()
    entered = asyncio.Event()
    rig.server.script(reply_hang(reply_text("here"), until=release))

    async def stuck(notice: Any) -> None:
        entered.set()
        await asyncio.Event().wait()

    agent = agent_with(rig, RetryPolicy(max_attempts=1, slow_notice_seconds=0.05))
    message = UserMessage("hi", sender_id=USER)
    turn = asyncio.create_task(agent.run_turn(KEY, message, TurnControl(), on_notice=stuck))
    await asyncio.wait_for(entered.wait(), 5)

    release.set()
    result = await asyncio.wait_for(turn, OBSERVER_SECONDS)  # not held for the notice's time box

    assert result.reply == "here"
