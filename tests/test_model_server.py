"""The scripted model server itself: the features other tests lean on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from core.model.base import ModelRequest
from core.model.errors import ModelError
from core.model.openai_client import OpenAIClient
from core.types import ChatMessage, ToolCall
from tests.support.model_server import (
    ReceivedRequest,
    Reply,
    ScriptedModelServer,
    reply_hang,
    reply_text,
    reply_tool_call,
)


def said(text: str) -> ModelRequest:
    return ModelRequest(messages=[ChatMessage(role="user", content=text)])


@pytest.fixture
async def client(model_server: ScriptedModelServer) -> AsyncIterator[OpenAIClient]:
    client = OpenAIClient(base_url=model_server.url, model="m", timeout=5.0, trust_env=False)
    yield client
    await client.aclose()


async def test_held_reply_is_sent_when_the_server_releases_it(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_hang(reply_text("late")))
    task = asyncio.create_task(client.complete(said("hi")))
    await model_server.wait_for_requests(1)
    assert not task.done()

    model_server.release()

    assert (await asyncio.wait_for(task, 5.0)).content == "late"


async def test_held_reply_waits_for_the_tests_own_event(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    gate = asyncio.Event()
    model_server.script(
        reply_hang(reply_tool_call("terminal", {"command": "ls"}), until=gate),
        reply_hang(reply_text("released by the server")),
    )
    task = asyncio.create_task(client.complete(said("hi")))
    await model_server.wait_for_requests(1)
    other = asyncio.create_task(client.complete(said("hi again")))
    await model_server.wait_for_requests(2)
    model_server.release()
    assert (await asyncio.wait_for(other, 5.0)).content == "released by the server"
    assert not task.done()

    gate.set()

    reply = await asyncio.wait_for(task, 5.0)
    assert reply.tool_calls == (ToolCall("call_1", "terminal", '{"command": "ls"}'),)


async def test_script_item_may_answer_from_the_request(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    def echo(request: ReceivedRequest) -> Reply:
        return reply_text(f"you said {request.last_user_text}")

    model_server.script(echo, echo)

    replies = [await client.complete(said(word)) for word in ("one", "two")]

    assert [r.content for r in replies] == ["you said one", "you said two"]


async def test_default_reply_answers_once_the_script_is_used_up(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    model_server.script(reply_text("scripted"))
    model_server.default = reply_text("default")

    replies = [(await client.complete(said("x"))).content for _ in range(3)]

    assert replies == ["scripted", "default", "default"]


async def test_unscripted_request_gets_a_500_naming_it(
    model_server: ScriptedModelServer, client: OpenAIClient
) -> None:
    with pytest.raises(ModelError, match=r"no reply scripted for request #0"):
        await client.complete(said("x"))

    assert model_server.unscripted == 1


async def test_models_endpoint_and_non_json_requests(model_server: ScriptedModelServer) -> None:
    async with httpx.AsyncClient(base_url=model_server.url, trust_env=False) as http:
        models = (await http.get("/models")).json()
        refused = await http.post("/chat/completions", content=b"not json")

    assert [m["id"] for m in models["data"]] == ["scripted-model"]
    assert refused.status_code == 400
    assert model_server.requests[0].body is None


async def test_wait_for_requests_times_out_saying_how_many_came(
    model_server: ScriptedModelServer,
) -> None:
    with pytest.raises(TimeoutError, match="got 0 of 1 requests"):
        await model_server.wait_for_requests(1, timeout=0.05)
