"""llama.cpp's recorded behaviour replayed over real HTTP (issue 28, N1–N4): its token
counts for dense text, its 400 with ``n_prompt_tokens``, its Mistral template's
alternation error (``tests.support.llamacpp``; bodies in ``tests/data/llamacpp/``), against
the real turn loop, a real SQLite store and ``context_window = 4096``."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import httpx
import pytest

from core.agent.control import TurnControl
from core.agent.failure_text import readable_failure
from core.agent.repair import NO_ANSWER
from core.model.classify import classify_status
from core.model.errors import ModelError
from core.tools.base import ToolContext, ToolResult
from tests.engine.conftest import Rig, make_tool
from tests.support.llamacpp import LlamaCpp, count_tokens, recorded, recorded_text
from tests.support.model_errors import OPENAI
from tests.support.model_server import (
    ReceivedRequest,
    Reply,
    reply_hang,
    reply_text,
    reply_tool_call,
)

WINDOW = 4096
LS = recorded_text("ls_la_usr_bin.txt")
LOG = recorded_text("log_paste.txt")
SOUL = " ".join(f"Rule {n}: answer briefly, and run a command only when asked." for n in range(60))
"""A system prompt of about 800 tokens: the gateway's real prompt and tools were 812-1069."""
SUMMARY = "Summary: the user ran ls -la /usr/bin and asked about the files."


def is_summary(request: ReceivedRequest) -> bool:
    return "compress the earlier part" in str(request.messages[0].get("content"))


def model(request: ReceivedRequest) -> Reply:
    """A model that runs the command it is asked to, then answers; a summary when asked."""
    if is_summary(request):
        return reply_text(SUMMARY)
    last = request.messages[-1]
    if last["role"] == "tool":
        return reply_text("The listing is long; most entries are links.")
    said = str(last.get("content"))
    if "Run the command" in said:
        return reply_tool_call("terminal", {"command": "ls -la /usr/bin"}, id=f"c{request.index}")
    return reply_text(f"Answer {request.index}.")


def ls_tool(rig: Rig) -> None:
    async def terminal(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(LS)

    rig.tools.register(make_tool("terminal", terminal))


def roles_in_a_row(request: ReceivedRequest) -> bool:
    roles = [m["role"] for m in request.wire_messages]
    return any(a == b == "user" for a, b in itertools.pairwise(roles))


def test_the_stand_in_tokenizer_has_the_recorded_densities() -> None:
    assert 1.9 <= len(LS) / count_tokens(LS) <= 2.1  # recorded: 2.0 chars a token
    assert 1.7 <= len(LOG) / count_tokens(LOG) <= 1.9  # recorded: 1.8
    assert len(LOG.encode()) >= 30_000


async def test_ls_la_usr_bin_at_4096_is_answered_and_the_next_five_too(rig: Rig) -> None:
    LlamaCpp(WINDOW).install(rig.server)
    ls_tool(rig)
    rig.agent(context_window=WINDOW, soul=SOUL)
    rig.server.script(*[model] * 40)

    first = await rig.turn("Run the command ls -la /usr/bin")
    later = [await rig.turn(f"Question {n}: what else is in there?") for n in range(5)]

    assert first.status == "completed", first.reply
    assert first.reply == "The listing is long; most entries are links."
    for n, result in enumerate(later):
        assert result.status == "completed", (n, result.reply)
        assert result.reply is not None and result.reply.startswith("Answer ")
    taken = [r for r in rig.server.requests if r not in rig.server.rejected]
    assert all((r.prompt_tokens or 0) <= WINDOW for r in taken)
    with_result = [r for r in taken if r.messages[-1]["role"] == "tool"]
    assert "characters cut from the middle of this tool result" in str(
        with_result[-1].messages[-1]["content"]
    )
    assert len(rig.server.rejected) <= 1  # at most one overflow, rescaled and retried
    assert any(is_summary(r) for r in taken)  # the big turn is summarised by the next one
    assert "system" in [m.role for m in await rig.stored()]  # the stored summary


async def test_a_30_kb_log_paste_gives_one_readable_message_and_the_next_works(
    rig: Rig,
) -> None:
    LlamaCpp(WINDOW).install(rig.server)
    rig.agent(context_window=WINDOW)
    rig.server.script(*[model] * 20)
    await rig.turn("Hello there")

    pasted = await rig.turn(LOG)
    after = await rig.turn("What is 5+5?")

    assert pasted.status == "completed" and pasted.reply and pasted.reply.startswith("Answer ")
    assert after.status == "completed" and after.reply and after.reply.startswith("Answer ")
    taken = [r for r in rig.server.requests if r not in rig.server.rejected]
    assert all((r.prompt_tokens or 0) <= WINDOW for r in taken)
    sent_paste = [r for r in taken if "characters cut from the middle of this message" in
                  str(r.wire_messages[-1].get("content"))]  # fmt: skip
    assert sent_paste, "the paste was sent whole"
    stored = [m for m in await rig.stored() if m.role == "user"]
    assert any(m.content == LOG for m in stored) or any(
        m.role == "system" for m in await rig.stored()
    )  # the store keeps the paste whole (or summarised it)


async def test_a_paste_opening_a_session_overflows_once_then_is_cut_to_the_counted_room(
    rig: Rig,
) -> None:
    LlamaCpp(WINDOW).install(rig.server)
    rig.agent(context_window=WINDOW, soul=SOUL)
    rig.server.script(*[model] * 4)

    pasted = await rig.turn(LOG)  # nothing learnt yet: bytes / 4 counts it half

    assert pasted.status == "completed" and pasted.reply == "Answer 1."
    refused, retried = rig.server.requests
    assert rig.server.rejected == [refused] and (refused.prompt_tokens or 0) > WINDOW
    assert (retried.prompt_tokens or 0) <= WINDOW
    assert (await rig.turn("What is 5+5?")).status == "completed"


async def test_a_stopped_turn_then_two_questions_are_both_answered(rig: Rig) -> None:
    LlamaCpp(WINDOW, alternation=True).install(rig.server)
    rig.agent(context_window=WINDOW)
    rig.server.script(reply_text("Hi!"), reply_hang(reply_text("never seen")))
    assert (await rig.turn("Hello")).reply == "Hi!"
    control = TurnControl()
    story = asyncio.create_task(rig.turn("Tell me a long story", control=control))
    await rig.server.wait_for_requests(2)
    control.stop()
    assert (await asyncio.wait_for(story, 5)).status == "interrupted"
    rig.server.script(reply_text("4."), reply_text("6."))

    two = await rig.turn("What is 2+2?")
    three = await rig.turn("What is 3+3?")

    assert (two.reply, three.reply) == ("4.", "6.")
    assert rig.server.rejected == []
    assert not any(roles_in_a_row(r) for r in rig.server.requests)
    sent = rig.server.requests[-1].messages
    assert {"role": "assistant", "content": NO_ANSWER} in sent
    assert all(m.role != "assistant" or m.content != NO_ANSWER for m in await rig.stored())


def _classified(status: int, body: dict[str, Any]) -> ModelError:
    response = httpx.Response(status, json=body)
    return ModelError(classify_status(response, json.dumps(body)))


@pytest.mark.parametrize(
    ("body", "count"),
    [(recorded("exceed_context_size.json"), 4127), (OPENAI.body, 130244)],
    ids=["llama.cpp", "openai"],
)
def test_an_overflow_names_the_servers_count(body: dict[str, Any], count: int) -> None:
    error = _classified(400, body)

    assert error.kind == "context_too_long"
    assert error.classification.prompt_tokens == count


def test_the_mistral_template_error_keeps_the_word_that_says_what_is_wrong() -> None:
    text = readable_failure(_classified(400, recorded("mistral_alternation.json")))

    assert "conversation roles must alternate" in text
    assert "\n" not in text
