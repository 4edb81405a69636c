"""Model client round trip: ``OpenAIClient.complete`` against the model host."""

from __future__ import annotations

from bench.figures import Row, print_table, sample
from bench.model_host import ModelHost
from bench.rig import client_for
from bench.sizes import Sizes
from core.model.base import ModelRequest
from core.model.openai_client import OpenAIClient
from core.types import ChatMessage

MESSAGES = (
    ChatMessage(role="system", content="You are a benchmark."),
    ChatMessage(role="user", content="Say something short."),
)


async def run(sizes: Sizes) -> None:
    async with ModelHost() as host:
        client = client_for(host)
        try:
            rows = [await _case(client, stream, sizes) for stream in (False, True)]
        finally:
            await client.aclose()
    print_table("model client round trip (127.0.0.1, keep-alive connection)", rows)


async def _case(client: OpenAIClient, stream: bool, sizes: Sizes) -> Row:
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    request = ModelRequest(MESSAGES, stream=stream, on_delta=on_delta if stream else None)

    async def call(index: int) -> None:
        reply = await client.complete(request)
        if not reply.content:
            raise RuntimeError(f"call {index}: empty reply")

    name = "streaming (SSE)" if stream else "non-streaming"
    return await sample(name, call, sizes.client_calls, traced=sizes.traced, unit="call")
