"""The session's model (:mod:`core.agent.model_choice`): a chooser the gateway gives
decides the client of every model call, and the turn's vision and streaming."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.agent.control import TurnControl
from core.agent.loop import CommonAgent
from core.agent.model_choice import ModelChoice
from core.agent.turn import UserMessage
from core.model.openai_client import OpenAIClient
from core.model.retry import RetryPolicy
from tests.engine.conftest import KEY, USER, Rig
from tests.engine.test_turn_attachments import photo
from tests.support.model_server import reply_text, reply_tool_call


@pytest.fixture
async def other(rig: Rig) -> AsyncIterator[OpenAIClient]:
    client = OpenAIClient(base_url=rig.server.url, model="other-model", trust_env=False)
    yield client
    await client.aclose()


def chosen_agent(rig: Rig, chosen: dict[str, ModelChoice | None]) -> CommonAgent:
    async def choose(key: str) -> ModelChoice | None:
        return chosen.get(key)

    return CommonAgent(
        rig.store, rig.client, rig.tools, rig.hooks, rig.approvals, rig.profile,
        clock=rig.clock, retry=RetryPolicy(max_attempts=1), choose_model=choose,
    )  # fmt: skip


async def test_none_keeps_the_profiles_model(rig: Rig) -> None:
    rig.server.script(reply_text("hi"))
    await chosen_agent(rig, {}).run_turn(KEY, UserMessage("hello", USER), TurnControl())
    assert rig.server.requests[0].body["model"] == "test-model"


async def test_a_choice_made_during_a_turn_counts_from_its_next_model_call(
    rig: Rig, other: OpenAIClient
) -> None:
    chosen: dict[str, ModelChoice | None] = {}
    rig.server.script(reply_tool_call("echo", {"text": "x"}), reply_text("done"))
    agent = chosen_agent(rig, chosen)

    async def switch(step: int, tools: list[dict[str, Any]]) -> None:
        if step == 2:  # the second call is about to be made
            chosen[KEY] = ModelChoice(other, vision=False, stream=False)

    await agent.run_turn(KEY, UserMessage("go", USER), TurnControl(), step_callback=switch)
    assert [r.body["model"] for r in rig.server.requests] == ["test-model", "other-model"]


async def test_the_choices_vision_and_stream_decide_the_turn(rig: Rig, other: OpenAIClient) -> None:
    assert not rig.profile.vision and not rig.profile.stream
    rig.server.script(reply_text("a screenshot"))
    agent = chosen_agent(rig, {KEY: ModelChoice(other, vision=True, stream=True)})
    message = UserMessage("what is this?", USER, attachments=(photo(rig),))
    await agent.run_turn(KEY, message, TurnControl())
    [request] = rig.server.requests
    assert request.body["model"] == "other-model" and request.body["stream"] is True
    assert "image_url" in json.dumps(request.messages)
