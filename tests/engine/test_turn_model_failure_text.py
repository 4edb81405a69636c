"""A model call that fails for good (``docs/turn-loop.md`` §4, "Failures"): logged once, at
WARNING, with the server's status and message (known secrets masked), and the user's reply
names the kind of failure in words, never ``kind: status``."""

from __future__ import annotations

import logging
import socket

import pytest

from core.agent.control import TurnControl
from core.agent.loop import CommonAgent
from core.agent.turn import UserMessage
from core.model.openai_client import OpenAIClient
from core.model.retry import RetryPolicy
from core.model.timeouts import Timeouts
from core.redaction import remember_secrets
from tests.engine.conftest import KEY, USER, Rig
from tests.support.model_server import reply_error, reply_hang

SECRET = "sk-failure-text-test-0123456789"
LLAMA_BAD_ROLE = "Unsupported param: role 'developer' is not known"


def failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "core.agent.model_call"]


async def test_a_refused_request_is_logged_once_and_told_in_words(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    remember_secrets([SECRET])
    rig.server.script(reply_error(400, f"{LLAMA_BAD_ROLE} (key {SECRET})"))
    caplog.set_level(logging.WARNING)

    result = await rig.turn("hi")

    assert (result.status, result.exit_reason) == ("failed", "model_error")
    assert result.reply is not None
    assert result.reply.startswith(
        "The model server refused the request, so the model could not answer (HTTP 400: "
        f"{LLAMA_BAD_ROLE} (key "
    )
    assert SECRET not in result.reply and "bad_response" not in result.reply
    [record] = failures(caplog)
    assert record.levelno == logging.WARNING
    logged = record.getMessage()
    assert "HTTP 400" in logged and LLAMA_BAD_ROLE in logged and SECRET not in logged


async def test_retries_spent_are_logged_once_not_per_attempt(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    rig.server.script(*[reply_error(503, "Loading model", type="unavailable_error")] * 3)
    caplog.set_level(logging.WARNING)

    result = await rig.turn("hi")

    assert result.reply == (
        "The model server is unavailable right now (HTTP 503: Loading model). "
        "Nothing was lost; try again."
    )
    [record] = failures(caplog)
    assert "after 3 attempt(s)" in record.getMessage()
    assert "HTTP 503" in record.getMessage() and "Loading model" in record.getMessage()


async def test_a_silent_server_is_told_as_not_answering_in_time(rig: Rig) -> None:
    rig.server.script(reply_hang())
    client = OpenAIClient(
        base_url=rig.server.url, model="m", timeouts=Timeouts(first_byte=0.2), trust_env=False
    )
    agent = CommonAgent(
        rig.store, client, rig.tools, rig.hooks, rig.approvals, rig.profile,
        clock=rig.clock, retry=RetryPolicy(max_attempts=1),
    )  # fmt: skip
    try:
        result = await agent.run_turn(KEY, UserMessage("hi", sender_id=USER), TurnControl())
    finally:
        await client.aclose()
        rig.server.release()

    assert result.reply == "The model server did not answer in time. Nothing was lost; try again."


async def test_an_unreachable_server_is_named_by_its_address(rig: Rig) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = OpenAIClient(base_url=f"http://127.0.0.1:{port}/v1", model="m", trust_env=False)
    agent = CommonAgent(
        rig.store, client, rig.tools, rig.hooks, rig.approvals, rig.profile,
        clock=rig.clock, retry=RetryPolicy(max_attempts=1),
    )  # fmt: skip
    try:
        result = await agent.run_turn(KEY, UserMessage("hi", sender_id=USER), TurnControl())
    finally:
        await client.aclose()

    assert result.reply == (
        f"The model server is unreachable at 127.0.0.1:{port}. Nothing was lost; try again."
    )
