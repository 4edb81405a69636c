"""Retries with backoff, through the real client against the scripted model server."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator

import pytest

from core.model.base import ModelRequest
from core.model.errors import ErrorClassification, ModelError
from core.model.openai_client import OpenAIClient
from core.model.retry import (
    ErrorObserver,
    Reclassify,
    RetryPolicy,
    call_with_retry,
)
from core.types import ChatMessage, ModelReply
from tests.support.model_server import (
    ScriptedModelServer,
    reply_error,
    reply_rate_limited,
    reply_text,
)

HELLO = ModelRequest(messages=[ChatMessage(role="user", content="hello")])
QUICK = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01)


@pytest.fixture
async def client(model_server: ScriptedModelServer) -> AsyncIterator[OpenAIClient]:
    client = OpenAIClient(base_url=model_server.url, model="m", timeout=5.0, trust_env=False)
    yield client
    await client.aclose()


async def complete_with_retry(
    client: OpenAIClient,
    policy: RetryPolicy = QUICK,
    *,
    reclassify: Reclassify | None = None,
    on_error: ErrorObserver | None = None,
) -> ModelReply:
    attempt = lambda: client.complete(HELLO)  # noqa: E731
    return await call_with_retry(attempt, policy, reclassify=reclassify, on_error=on_error)


async def test_retry_waits_the_retry_after_the_server_asked_for(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_rate_limited(retry_after=0.2), reply_text("ok"))

    reply = await complete_with_retry(client)

    first, second = model_server.requests
    assert reply.content == "ok"
    assert 0.2 <= second.at - first.at < 1.0


async def test_server_errors_are_retried_until_success(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_error(500), reply_error(503), reply_text("third time"))

    reply = await complete_with_retry(client)

    assert reply.content == "third time"
    assert len(model_server.requests) == 3


async def test_retry_gives_up_after_max_attempts_with_the_last_error(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(*[reply_error(502, f"bad gateway {n}") for n in range(3)], reply_text("x"))

    with pytest.raises(ModelError) as caught:
        await complete_with_retry(client, RetryPolicy(max_attempts=3, base_delay=0.001))

    assert caught.value.kind == "server"
    assert "bad gateway 2" in str(caught.value)
    assert (len(model_server.requests), model_server.pending) == (3, 1)


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (401, "invalid key", "auth"),
        (400, "maximum context length is 8192 tokens", "context_too_long"),
        (422, "unprocessable", "bad_response"),
    ],
)
async def test_non_retryable_errors_are_raised_after_one_attempt(
    model_server: ScriptedModelServer, client: OpenAIClient, status: int, message: str, kind: str
) -> None:
    model_server.script(reply_error(status, message), reply_text("never sent"))

    with pytest.raises(ModelError) as caught:
        await complete_with_retry(client)

    assert caught.value.kind == kind
    assert (len(model_server.requests), model_server.pending) == (1, 1)


async def test_reclassify_hook_can_make_a_400_retryable(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_error(400, "provider hiccup, please retry"), reply_text("ok"))
    seen: list[ErrorClassification] = []

    async def reclassify(found: ErrorClassification) -> ErrorClassification:
        seen.append(found)
        return found.with_retryable("hiccup" in found.message)

    reply = await complete_with_retry(client, reclassify=reclassify)

    assert reply.content == "ok"
    assert [(c.kind, c.status, c.retryable) for c in seen] == [("bad_response", 400, False)]


async def test_reclassify_hook_can_make_a_retryable_error_final(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_error(503, "down for maintenance"), reply_text("never sent"))

    async def reclassify(found: ErrorClassification) -> ErrorClassification:
        return found.with_retryable(False)

    with pytest.raises(ModelError) as caught:
        await complete_with_retry(client, reclassify=reclassify)

    assert (caught.value.kind, caught.value.classification.retryable) == ("server", False)
    assert isinstance(caught.value.__cause__, ModelError)
    assert len(model_server.requests) == 1


async def test_on_error_observes_every_failed_attempt(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_error(500), reply_rate_limited(retry_after=0.01), reply_text("ok"))
    observed: list[str] = []

    async def on_error(error: ModelError) -> None:
        observed.append(error.kind)

    await complete_with_retry(client, on_error=on_error)

    assert observed == ["server", "rate_limited"]


async def test_failing_hooks_are_logged_and_do_not_stop_retrying(
    model_server: ScriptedModelServer, client: OpenAIClient, caplog: pytest.LogCaptureFixture
) -> None:
    model_server.script(reply_error(500), reply_text("ok"))

    async def broken_observer(_: ModelError) -> None:
        raise RuntimeError("hook bug")

    async def broken_reclassify(_: ErrorClassification) -> ErrorClassification:
        raise RuntimeError("hook bug")

    with caplog.at_level(logging.ERROR, logger="core.model.retry"):
        reply = await complete_with_retry(
            client, on_error=broken_observer, reclassify=broken_reclassify
        )

    assert reply.content == "ok"
    assert len([r for r in caplog.records if "hook bug" in (r.exc_text or "")]) == 2


async def test_retry_after_beyond_the_limit_gives_up_at_once(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_rate_limited(retry_after=30), reply_text("never sent"))

    with pytest.raises(ModelError) as caught:
        await complete_with_retry(client, RetryPolicy(max_retry_after=5.0))

    assert caught.value.classification.retry_after == 30
    assert len(model_server.requests) == 1


async def test_cancel_during_backoff_sleep_aborts_at_once(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_rate_limited(retry_after=30), reply_text("never sent"))
    failed = asyncio.Event()

    async def on_error(_: ModelError) -> None:
        failed.set()

    task = asyncio.create_task(complete_with_retry(client, RetryPolicy(), on_error=on_error))
    await asyncio.wait_for(failed.wait(), 5.0)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert time.monotonic() - started < 1.0  # not the 30 s the server asked for
    assert len(model_server.requests) == 1


def test_backoff_is_full_jitter_under_an_exponential_cap() -> None:
    policy = RetryPolicy(max_attempts=10, base_delay=0.5, max_delay=4.0)
    server_error = ErrorClassification.of("server", "boom")
    rng = random.Random(7)

    for attempt, cap in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (6, 4.0)]:
        delays = [policy.delay(server_error, attempt, rng) or 0.0 for _ in range(200)]
        assert all(0.0 <= d <= cap for d in delays)
        assert max(delays) > 0.9 * cap and min(delays) < 0.1 * cap
    assert policy.delay(server_error, 10, rng) is None


@pytest.mark.parametrize(
    ("fields", "problem"),
    [({"max_attempts": 0}, "at least 1"), ({"base_delay": -1.0}, "negative")],
)
def test_policy_rejects_nonsense_settings(fields: dict[str, float], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        RetryPolicy(**fields)  # type: ignore[arg-type]
