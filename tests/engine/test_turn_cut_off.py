"""``finish_reason`` honoured in the chat's reply (docs/turn-loop.md §17): an answer cut by
``length`` is marked cut off (and stored as the model gave it, so "continue" goes on), an
empty answer is never silent, and tool-call markup in the text is not shown as the answer.

Stream shapes are llama.cpp's ``llama-server`` as recorded
(/work/shared/research/real-model-servers.md): a role chunk with ``content: null``, the
finish chunk with an empty delta, a usage chunk with ``choices: []`` and ``timings``."""

from __future__ import annotations

from typing import Any

import pytest

from core.agent.answer import (
    CUT_OFF_NOTE,
    EMPTY_ANSWER,
    EMPTY_CUT_IN_CALL,
    EMPTY_CUT_OFF,
    FILTERED_NOTE,
    MARKUP_NOTE,
)
from tests.engine.conftest import Rig
from tests.support.model_server import reply_sse, reply_text

MODES = [pytest.param(False, id="whole"), pytest.param(True, id="stream")]


def llama_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """One ``chat.completion.chunk`` as llama-server writes it."""
    return {
        "choices": [{"finish_reason": finish, "index": 0, "delta": delta}],
        "created": 1760000000,
        "id": "chatcmpl-llama",
        "model": "/models/SmolLM2-135M-Instruct.Q4_1.gguf",
        "system_fingerprint": "b0-unknown",
        "object": "chat.completion.chunk",
    }


def llama_usage(prompt: int, completion: int) -> dict[str, Any]:
    usage = {"completion_tokens": completion, "prompt_tokens": prompt}
    usage["total_tokens"] = prompt + completion
    return {
        "choices": [],
        "object": "chat.completion.chunk",
        "usage": {**usage, "prompt_tokens_details": {"cached_tokens": 110}},
        "timings": {"prompt_n": prompt, "predicted_n": completion},
    }


def llama_stream(*pieces: str, finish: str) -> list[dict[str, Any]]:
    chunks = [llama_chunk({"role": "assistant", "content": None})]
    chunks += [llama_chunk({"content": piece}) for piece in pieces]
    return [*chunks, llama_chunk({}, finish), llama_usage(902, len(pieces))]


@pytest.mark.parametrize("stream", MODES)
async def test_an_answer_cut_by_length_is_marked_cut_off_and_continue_goes_on(
    rig: Rig, stream: bool
) -> None:
    rig.agent(stream=stream)
    rig.server.script(
        reply_text("A web browser loads a page by", finish_reason="length"),
        reply_text("sending a request to the server."),
    )

    cut = await rig.turn("Explain in detail how a browser loads a page.")
    more = await rig.turn("continue")

    assert cut.status == "completed"
    assert cut.reply == f"A web browser loads a page by\n\n{CUT_OFF_NOTE}"
    assert "cut off" in cut.reply and "continue" in cut.reply
    stored = await rig.stored()
    assert stored[1].content == "A web browser loads a page by"  # as the model gave it
    assert more.reply == "sending a request to the server."
    sent = [(m["role"], m["content"]) for m in rig.server.requests[1].messages[1:]]
    assert sent[1] == ("assistant", "A web browser loads a page by")
    assert sent[2][0] == "user" and "continue" in sent[2][1]


async def test_a_cut_off_answer_in_llama_cpps_stream_shape_is_marked(rig: Rig) -> None:
    rig.agent(stream=True)
    rig.server.script(reply_sse(llama_stream("A ", "web ", "browser", finish="length")))

    result = await rig.turn("Explain in detail.")

    assert result.reply == f"A web browser\n\n{CUT_OFF_NOTE}"


@pytest.mark.parametrize("stream", MODES)
async def test_a_content_filter_stop_is_said(rig: Rig, stream: bool) -> None:
    rig.agent(stream=stream)
    rig.server.script(reply_text("Here is how", finish_reason="content_filter"))

    result = await rig.turn("tell me")

    assert result.reply == f"Here is how\n\n{FILTERED_NOTE}"


@pytest.mark.parametrize("stream", MODES)
async def test_an_empty_answer_tells_the_user(rig: Rig, stream: bool) -> None:
    rig.agent(stream=stream)
    rig.server.script(reply_text(""), reply_text("", finish_reason="length"))

    empty = await rig.turn("say nothing")
    cut = await rig.turn("say a lot")

    assert (empty.status, empty.reply) == ("completed", EMPTY_ANSWER)
    assert (cut.status, cut.reply) == ("completed", EMPTY_CUT_OFF)
    assert [m.role for m in await rig.stored()] == ["user", "user"]  # nothing empty stored


async def test_a_stream_cut_inside_held_back_tool_markup_tells_the_user(rig: Rig) -> None:
    """llama-server holds back a partial ``<tool_call>`` in a stream: the answer is empty
    with ``length`` (the page got busy → idle and no message at all before)."""
    rig.agent(stream=True)
    rig.server.script(reply_sse(llama_stream(finish="length")))

    result = await rig.turn("Run the command ls.")

    assert result.reply == EMPTY_CUT_OFF


@pytest.mark.parametrize("stream", MODES)
async def test_raw_tool_call_markup_cut_off_is_not_shown(rig: Rig, stream: bool) -> None:
    rig.agent(stream=stream)
    markup = '<tool_call>\n{"name'  # what llama-server answered with -n 8, non-stream
    rig.server.script(reply_text(markup, chunks=[markup], finish_reason="length"))

    result = await rig.turn("Run the command ls.")

    assert result.reply == EMPTY_CUT_IN_CALL
    assert "<tool_call>" not in (result.reply or "")
    assert [m.role for m in await rig.stored()] == ["user"]


@pytest.mark.parametrize("stream", MODES)
async def test_text_before_unparsed_tool_markup_is_shown_and_stored_without_it(
    rig: Rig, stream: bool
) -> None:
    rig.agent(stream=stream)
    text = 'Let me look.\n<tool_call>\n{"name": "terminal", "arguments": {"command": "ls"}}\n'
    rig.server.script(reply_text(text + "</tool_call>", chunks=[text, "</tool_call>"]))

    result = await rig.turn("Run the command ls.")

    assert result.reply == f"Let me look.\n\n{MARKUP_NOTE}"
    stored = await rig.stored()
    assert stored[-1].content == "Let me look."
    assert "<tool_call>" not in "".join(m.text() for m in stored)


async def test_tool_markup_inside_prose_is_left_alone(rig: Rig) -> None:
    text = "Hermes models write calls as `<tool_call>` tags."
    rig.server.script(reply_text(text))

    result = await rig.turn("How do Hermes models call tools?")

    assert result.reply == text
