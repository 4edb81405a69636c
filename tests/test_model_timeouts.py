"""The model client's three timeouts against the scripted server (``docs/turn-loop.md`` §4,
"Timeouts"): a slow stream that keeps flowing is never cut, however long it runs; one that
stalls is cut by ``idle``; keep-alive pings count as life; ``first_byte`` bounds the wait
for the answer to begin and not the stream after it; the deprecated ``timeout`` stands in
for each bound."""

from __future__ import annotations

import time

import pytest

from core.model.base import ModelRequest
from core.model.errors import ModelError
from core.model.openai_client import OpenAIClient
from core.model.timeouts import Timeouts
from core.types import ChatMessage
from tests.support.model_server import ScriptedModelServer, reply_hang, reply_text

HELLO = [ChatMessage("user", "hello")]
WORDS = [f"w{n} " for n in range(12)]


def client_with(server: ScriptedModelServer, **bounds: float) -> OpenAIClient:
    return OpenAIClient(
        base_url=server.url, model="m", timeouts=Timeouts(**bounds), trust_env=False
    )


def streamed() -> tuple[ModelRequest, list[str]]:
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    return ModelRequest(HELLO, stream=True, on_delta=on_delta), deltas


async def test_a_stream_that_keeps_flowing_outlasts_every_bound(
    model_server: ScriptedModelServer,
) -> None:
    model_server.script(reply_text("".join(WORDS), chunks=WORDS, gap=0.05))
    client = client_with(model_server, connect=0.3, first_byte=0.3, idle=0.3)
    request, deltas = streamed()
    began = time.monotonic()
    try:
        reply = await client.complete(request)
    finally:
        await client.aclose()

    assert time.monotonic() - began > 0.3 + 0.1  # longer than any one bound
    assert reply.content == "".join(WORDS)
    assert deltas == WORDS


async def test_a_stream_that_stalls_is_cut_by_the_idle_timeout(
    model_server: ScriptedModelServer,
) -> None:
    model_server.script(reply_text("".join(WORDS), chunks=WORDS, stall_after=3, hold=False))
    client = client_with(model_server, first_byte=5.0, idle=0.2)
    request, deltas = streamed()
    try:
        with pytest.raises(ModelError) as caught:
            await client.complete(request)
    finally:
        await client.aclose()
        model_server.release()

    assert (caught.value.kind, caught.value.classification.retryable) == ("timeout", True)
    assert deltas == WORDS[:2]  # what came before the stall (the role event is first)


async def test_keep_alive_pings_count_as_a_stream_that_flows(
    model_server: ScriptedModelServer,
) -> None:
    words = WORDS[:3]
    model_server.script(reply_text("".join(words), chunks=words, gap=0.3, ping_every=0.03))
    client = client_with(model_server, first_byte=5.0, idle=0.15)
    request, deltas = streamed()
    try:
        reply = await client.complete(request)
    finally:
        await client.aclose()

    assert reply.content == "".join(words)  # each 0.3 s gap > idle, but pinged
    assert deltas == words


async def test_the_same_gaps_without_pings_are_cut(model_server: ScriptedModelServer) -> None:
    words = WORDS[:3]
    model_server.script(reply_text("".join(words), chunks=words, gap=0.3))
    client = client_with(model_server, first_byte=5.0, idle=0.15)
    request, _ = streamed()
    try:
        with pytest.raises(ModelError) as caught:
            await client.complete(request)
    finally:
        await client.aclose()

    assert caught.value.kind == "timeout"


async def test_first_byte_bounds_the_wait_for_the_answer_not_the_stream(
    model_server: ScriptedModelServer,
) -> None:
    model_server.script(
        reply_text("late start", delay=0.4), reply_text("".join(WORDS), chunks=WORDS, gap=0.05)
    )
    slow_to_start = client_with(model_server, first_byte=0.2, idle=5.0)
    try:
        with pytest.raises(ModelError) as caught:
            await slow_to_start.complete(streamed()[0])
        reply = await slow_to_start.complete(streamed()[0])  # 0.6 s in all, > first_byte
    finally:
        await slow_to_start.aclose()

    assert caught.value.kind == "timeout"
    assert reply.content == "".join(WORDS)


async def test_a_non_streamed_answer_must_come_within_first_byte(
    model_server: ScriptedModelServer,
) -> None:
    model_server.script(reply_text("whole", delay=0.4), reply_text("whole", delay=0.4))
    strict = client_with(model_server, first_byte=0.2, idle=5.0)
    patient = client_with(model_server, first_byte=2.0, idle=0.1)
    try:
        with pytest.raises(ModelError) as caught:
            await strict.complete(ModelRequest(HELLO))
        reply = await patient.complete(ModelRequest(HELLO))  # idle plays no part before it
    finally:
        await strict.aclose()
        await patient.aclose()

    assert caught.value.kind == "timeout"
    assert reply.content == "whole"


async def test_a_silent_server_is_cut_by_first_byte(model_server: ScriptedModelServer) -> None:
    model_server.script(reply_hang())
    client = client_with(model_server, first_byte=0.2)
    try:
        with pytest.raises(ModelError) as caught:
            await client.complete(streamed()[0])
    finally:
        await client.aclose()

    assert caught.value.kind == "timeout"


def test_the_deprecated_timeout_stands_in_for_each_bound_not_given() -> None:
    assert Timeouts.given() == Timeouts(10.0, 120.0, 60.0)
    assert Timeouts.given(legacy=30.0) == Timeouts(30.0, 30.0, 30.0)
    assert Timeouts.given(idle=90.0, legacy=30.0) == Timeouts(30.0, 30.0, 90.0)
    client = OpenAIClient(base_url="http://127.0.0.1:9/v1", model="m", timeout=7.0)
    assert client.timeouts == Timeouts(7.0, 7.0, 7.0)


def test_a_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="idle timeout must be positive"):
        Timeouts(idle=0)
