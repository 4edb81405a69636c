"""The OpenAI-compatible client, through real httpx against the scripted model server."""

from __future__ import annotations

import asyncio
import email.utils
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable

import pytest

from core.model.base import ModelRequest
from core.model.errors import ModelError
from core.model.openai_client import OpenAIClient
from core.types import ChatMessage, ToolCall, ToolSpec
from tests.support.model_server import (
    ScriptedModelServer,
    ToolCallScript,
    reply_error,
    reply_hang,
    reply_json,
    reply_raw,
    reply_sse,
    reply_text,
    reply_tool_calls,
)

HELLO = ModelRequest(messages=[ChatMessage(role="user", content="hello")])
TERMINAL = ToolSpec(
    name="terminal",
    description="Run a shell command",
    parameters={"type": "object", "properties": {"command": {"type": "string"}}},
)


@pytest.fixture
async def client(model_server: ScriptedModelServer) -> AsyncIterator[OpenAIClient]:
    client = OpenAIClient(
        base_url=model_server.url,
        model="test-model",
        api_key="sk-test",
        timeout=5.0,
        headers={"X-Org": "commonos"},
        trust_env=False,
    )
    yield client
    await client.aclose()


def streamed(request: ModelRequest = HELLO) -> tuple[ModelRequest, list[str]]:
    deltas: list[str] = []

    async def on_delta(fragment: str) -> None:
        deltas.append(fragment)

    return ModelRequest(request.messages, request.tools, stream=True, on_delta=on_delta), deltas


async def failure(client: OpenAIClient, request: ModelRequest = HELLO) -> ModelError:
    with pytest.raises(ModelError) as caught:
        await client.complete(request)
    return caught.value


# ---------------------------------------------------------------------------- replies


async def test_text_reply_carries_content_finish_reason_and_usage(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_text("hello there", usage=(12, 3)))

    reply = await client.complete(HELLO)

    assert (reply.content, reply.tool_calls, reply.finish_reason) == ("hello there", (), "stop")
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (12, 3)


async def test_request_carries_model_messages_tools_extra_and_headers(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_text("ok"))
    call = ToolCall("call_9", "terminal", '{"command": "ls"}')
    messages = [
        ChatMessage(role="system", content="be brief"),
        ChatMessage(role="assistant", content=None, tool_calls=(call,)),
        ChatMessage(role="tool", content="a.txt", tool_call_id="call_9", name="terminal"),
    ]

    await client.complete(ModelRequest(messages, (TERMINAL,), extra={"temperature": 0.25}))

    sent = model_server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == "test-model"
    assert sent.messages == [m.to_wire() for m in messages]
    assert sent.tools == [TERMINAL.to_wire()]
    assert sent.body["temperature"] == 0.25
    assert "stream" not in sent.body
    assert sent.headers["Authorization"] == "Bearer sk-test"
    assert sent.headers["X-Org"] == "commonos"


async def test_tool_calls_reply_is_parsed_in_order(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(
        reply_tool_calls([("call_1", "terminal", {"command": "ls"}), ("call_2", "clarify", "{}")])
    )

    reply = await client.complete(HELLO)

    assert reply.content is None
    assert reply.finish_reason == "tool_calls"
    assert reply.tool_calls == (
        ToolCall("call_1", "terminal", '{"command": "ls"}'),
        ToolCall("call_2", "clarify", "{}"),
    )


async def test_streaming_text_calls_on_delta_per_fragment(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_text("Hello world", chunks=["Hel", "lo ", "world"], usage=(7, 2)))
    request, deltas = streamed()

    reply = await client.complete(request)

    assert deltas == ["Hel", "lo ", "world"]
    assert reply.content == "Hello world"
    assert reply.finish_reason == "stop"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (7, 2)
    sent = model_server.requests[0].body
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}


async def test_streaming_assembles_interleaved_fragmented_tool_calls(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    calls: list[ToolCallScript] = [
        ("call_a", "terminal", {"command": "ls -la /tmp && echo done"}),
        ("call_b", "clarify", {"question": "Which one?", "choices": ["x", "y", "z"]}),
    ]
    model_server.script(reply_tool_calls(calls, arg_fragments=5, interleave=True))
    request, deltas = streamed()

    reply = await client.complete(request)

    assert deltas == []
    assert [(c.id, c.name, json.loads(c.arguments)) for c in reply.tool_calls] == calls
    assert reply.finish_reason == "tool_calls"


async def test_streaming_keeps_text_alongside_tool_calls(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(
        reply_tool_calls([("c1", "terminal", {"command": "pwd"})], content="Let me look.")
    )
    request, deltas = streamed()

    reply = await client.complete(request)

    assert "".join(deltas) == reply.content == "Let me look."
    assert reply.tool_calls == (ToolCall("c1", "terminal", '{"command": "pwd"}'),)


async def test_stream_request_answered_with_plain_json_is_accepted(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    plain = {"choices": [{"message": {"role": "assistant", "content": "whole"}}]}
    model_server.script(reply_json(plain))
    request, deltas = streamed()

    reply = await client.complete(request)

    assert (reply.content, deltas) == ("whole", ["whole"])


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_failures_are_auth_and_not_retryable(
    model_server: ScriptedModelServer, client: OpenAIClient, status: int
) -> None:
    model_server.script(reply_error(status, "Incorrect API key provided", code="invalid_api_key"))

    error = await failure(client)

    assert (error.kind, error.classification.retryable) == ("auth", False)
    assert error.classification.status == status
    assert "Incorrect API key provided" in str(error)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"Retry-After": "0.2"}, 0.2),
        ({"retry-after-ms": "1500", "Retry-After": "2"}, 1.5),
    ],
)
async def test_rate_limit_takes_retry_after_from_headers(
    model_server: ScriptedModelServer,
    client: OpenAIClient,
    headers: dict[str, str],
    expected: float,
) -> None:
    model_server.script(reply_error(429, "slow down", code="rate_limit_exceeded", headers=headers))

    error = await failure(client)

    assert (error.kind, error.classification.retryable) == ("rate_limited", True)
    assert error.classification.retry_after == pytest.approx(expected)


async def test_rate_limit_takes_retry_after_from_http_date(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    model_server.script(reply_error(429, "slow down", headers={"Retry-After": when}))

    error = await failure(client)

    assert error.classification.retry_after is not None
    assert 25 <= error.classification.retry_after <= 31


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"error": {"message": "Rate limit reached. Please try again in 250ms."}}, 0.25),
        ({"error": {"message": "busy", "retry_after": 3}}, 3.0),
    ],
)
async def test_rate_limit_takes_retry_after_from_body(
    model_server: ScriptedModelServer, client: OpenAIClient, body: object, expected: float
) -> None:
    model_server.script(reply_json(body, status=429))

    error = await failure(client)

    assert error.kind == "rate_limited"
    assert error.classification.retry_after == pytest.approx(expected)


async def test_insufficient_quota_is_rate_limited_but_not_retryable(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_error(429, "You exceeded your quota", code="insufficient_quota"))

    error = await failure(client)

    assert (error.kind, error.classification.retryable) == ("rate_limited", False)


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("Input is too large", "context_length_exceeded"),
        ("This model's maximum context length is 8192 tokens, you asked for 9000", None),
    ],
)
async def test_context_length_400_is_context_too_long(
    model_server: ScriptedModelServer, client: OpenAIClient, message: str, code: str | None
) -> None:
    model_server.script(reply_error(400, message, code=code, type="invalid_request_error"))

    error = await failure(client)

    assert (error.kind, error.classification.retryable) == ("context_too_long", False)


async def test_other_400_is_bad_response(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_error(400, "Unknown parameter: 'foo'", type="invalid_request_error"))

    error = await failure(client)

    assert (error.kind, error.classification.retryable) == ("bad_response", False)
    assert "HTTP 400" in str(error) and "Unknown parameter" in str(error)


async def test_503_with_retry_after_carries_it(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_error(503, "maintenance", headers={"Retry-After": "4"}))

    error = await failure(client)

    assert (error.kind, error.classification.retry_after) == ("server", 4.0)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"message": "Rate limit exceeded", "type": "rate_limit_error"}, "rate_limited"),
        ({"message": "overloaded", "type": "server_error"}, "server"),
        ("something odd happened", "bad_response"),
    ],
)
async def test_error_object_in_a_200_reply_is_classified(
    model_server: ScriptedModelServer, client: OpenAIClient, error: object, kind: str
) -> None:
    model_server.script(reply_json({"error": error}))

    found = await failure(client)

    assert found.kind == kind


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_5xx_is_server_and_retryable(
    model_server: ScriptedModelServer, client: OpenAIClient, status: int
) -> None:
    model_server.script(reply_error(status, "The server had an error"))

    error = await failure(client)

    assert (error.kind, error.classification.retryable) == ("server", True)
    assert error.classification.status == status


async def test_500_with_plain_text_body_quotes_it(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_raw("upstream crashed\n", status=500, content_type="text/plain"))

    error = await failure(client)

    assert error.kind == "server"
    assert str(error) == "server: model server returned HTTP 500: upstream crashed"


async def test_silent_server_is_timeout(model_server: ScriptedModelServer) -> None:
    model_server.script(reply_hang())
    client = OpenAIClient(base_url=model_server.url, model="m", timeout=0.2, trust_env=False)

    error = await failure(client)
    await client.aclose()

    assert (error.kind, error.classification.retryable) == ("timeout", True)


async def test_connection_refused_is_network() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = OpenAIClient(base_url=f"http://127.0.0.1:{port}/v1", model="m", trust_env=False)

    error = await failure(client)
    await client.aclose()

    assert (error.kind, error.classification.retryable) == ("network", True)
    assert f"127.0.0.1:{port}" in str(error)


async def test_non_json_body_is_bad_response_quoting_it(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_raw("<html><body>502 Bad Gateway</body></html>"))

    error = await failure(client)

    assert (error.kind, error.classification.retryable) == ("bad_response", False)
    assert "not JSON" in str(error) and "<html>" in str(error)


async def test_redirect_names_the_target_address(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    moved = {"Location": "https://example.test/v1/chat/completions"}
    model_server.script(reply_raw("", status=301, headers=moved))

    error = await failure(client)

    assert error.kind == "bad_response"
    assert "redirected to https://example.test/v1/chat/completions" in str(error)


@pytest.mark.parametrize(
    "body",
    [{"object": "chat.completion"}, {"choices": []}, {"choices": [{"finish_reason": "stop"}]}],
)
async def test_reply_without_usable_choice_is_bad_response(
    model_server: ScriptedModelServer, client: OpenAIClient, body: object
) -> None:
    model_server.script(reply_json(body))

    error = await failure(client)

    assert error.kind == "bad_response"


async def test_error_event_in_stream_is_classified(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    event = {"error": {"message": "maximum context length exceeded", "code": "context_length"}}
    model_server.script(reply_sse([event]))

    error = await failure(client, streamed()[0])

    assert error.kind == "context_too_long"


async def test_stream_of_garbage_is_bad_response(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_sse(["this is not json"]))

    error = await failure(client, streamed()[0])

    assert error.kind == "bad_response"
    assert "this is not json" in str(error)


async def test_stream_ending_without_done_or_finish_is_bad_response(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "half"}, "finish_reason": None}]}
    model_server.script(reply_sse([chunk], done=False))

    error = await failure(client, streamed()[0])

    assert error.kind == "bad_response"


async def test_stream_cut_by_server_is_network(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_text("one two three four five", abort_after=2))

    error = await failure(client, streamed()[0])

    assert (error.kind, error.classification.retryable) == ("network", True)


# ---------------------------------------------------------------------------- cancellation


async def cancel_when_in_flight(
    model_server: ScriptedModelServer, task: asyncio.Task[object], in_flight: Awaitable[object]
) -> float:
    """Cancel ``task`` once ``in_flight`` is done; seconds until the server saw the close."""
    await asyncio.wait_for(in_flight, 5.0)
    cancelled_at = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    received = model_server.requests[0]
    await asyncio.wait_for(received.closed.wait(), 5.0)
    assert received.closed_at is not None
    return received.closed_at - cancelled_at


async def test_cancel_mid_request_closes_the_connection(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_hang())
    task: asyncio.Task[object] = asyncio.create_task(client.complete(HELLO))

    seconds = await cancel_when_in_flight(model_server, task, model_server.wait_for_requests(1))

    assert seconds >= 0  # closed by the cancel: the server itself never ends this request


async def test_cancel_mid_stream_closes_the_connection(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_text("first second third", stall_after=2))
    first_delta = asyncio.Event()

    async def on_delta(_: str) -> None:
        first_delta.set()

    request = ModelRequest(HELLO.messages, stream=True, on_delta=on_delta)
    task: asyncio.Task[object] = asyncio.create_task(client.complete(request))

    seconds = await cancel_when_in_flight(model_server, task, first_delta.wait())

    assert seconds >= 0  # closed by the cancel: the server itself never ends this request


async def test_client_serves_next_call_after_a_cancelled_one(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_hang(), reply_text("still here"))
    task = asyncio.create_task(client.complete(HELLO))
    await model_server.wait_for_requests(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    reply = await client.complete(HELLO)

    assert reply.content == "still here"


@pytest.mark.parametrize("base_url", ["127.0.0.1:8080/v1", "http://[::1/v1"])
async def test_malformed_base_url_is_a_final_network_error(base_url: str) -> None:
    client = OpenAIClient(base_url=base_url, model="m", trust_env=False)

    error = await failure(client)
    await client.aclose()

    assert (error.kind, error.classification.retryable) == ("network", False)
    assert "base_url" in str(error)
