"""Cache-safe prompts: the clock never changes the bytes before the tools and the history.

Issue 19 item 4, ``docs/turn-loop.md`` §2 step 3 ("Cache-safe prompts"). Against a real
llama-server the clock line in the system message broke the prompt cache once a minute
(first token 0.33 s with a hit, 10.3 s after the minute changed): the chat template renders
the tools block after the system text. The scripted server measures what a prompt cache
could reuse (``report_cache_reuse``, like llama-server's ``timings.cache_n``).
"""

from __future__ import annotations

import json
from typing import Any

from tests.engine.conftest import Rig
from tests.support.model_server import (
    ReceivedRequest,
    cache_reuse,
    prompt_bytes,
    reply_text,
    reply_tool_call,
)


def prefix_up_to_last_user(request: ReceivedRequest) -> str:
    """Serialised model, tools and the messages before the last user message."""
    messages = request.wire_messages
    last_user = max(n for n, m in enumerate(messages) if m["role"] == "user")
    return json.dumps([request.model, request.tools, messages[:last_user]], ensure_ascii=False)


def with_clock_in_system(request: ReceivedRequest) -> ReceivedRequest:
    """The same request laid out as before issue 19: the clock as the system message's
    last paragraph, the user message bare (a reconstruction, for the 'before' figure)."""
    body: dict[str, Any] = json.loads(request.raw)
    messages = body["messages"]
    last_user = max(n for n, m in enumerate(messages) if m["role"] == "user")
    text, note = messages[last_user]["content"].rsplit("\n\n", 1)
    messages[last_user] = {**messages[last_user], "content": text}
    messages[0] = {**messages[0], "content": f"{messages[0]['content']}\n\n{note[1:-1]}"}
    raw = json.dumps(body).encode()
    return ReceivedRequest(request.index, request.path, request.headers, raw, body, request.at)


async def test_two_turns_a_minute_apart_send_byte_identical_prefixes(rig: Rig) -> None:
    rig.server.report_cache_reuse = True
    rig.server.script(reply_text("4"), reply_text("6"))

    await rig.turn("What is 2+2?")
    rig.clock.advance(60)
    await rig.turn("What is 3+3?")

    first, second = rig.server.requests
    assert first.wire_messages[-1]["content"].endswith(
        "[Current time: Friday 2027-01-15 08:00 UTC]"
    )
    assert second.wire_messages[-1]["content"].endswith(
        "[Current time: Friday 2027-01-15 08:01 UTC]"
    )
    # turn 1's prefix up to its user message (model, tools, system) opens turn 2's, byte
    # for byte, and so does turn 1's user text: only the note after it is new
    before, after = prefix_up_to_last_user(first), prefix_up_to_last_user(second)
    assert after.startswith(before[: -len("]]")])
    assert second.wire_messages[1] == {"role": "user", "content": "What is 2+2?"}
    assert second.wire_messages[:1] == first.wire_messages[:1]
    assert second.tools == first.tools and second.model == first.model

    reused_after = rig.server.cache_reuse[1]
    old_first = with_clock_in_system(first)
    reused_before = cache_reuse([old_first], with_clock_in_system(second))
    old_tools_start = len(prompt_line(first.model) + prompt_line(old_first.wire_messages[0]))
    assert reused_before < old_tools_start  # the old layout broke inside the system message
    tools_start = len(prompt_line(first.model) + prompt_line(first.wire_messages[0]))
    history_start = tools_start + len(prompt_line(first.tools))
    assert reused_after > history_start + len("What is 2+2?")  # now turn 1's text is reused
    total = len(prompt_bytes(second))
    print(
        f"\nprompt cache reuse, turn 2 a minute after turn 1, of {total} prompt bytes:"
        f" clock in the system message {reused_before}, as a note on the user message"
        f" {reused_after}"
    )


def prompt_line(part: object) -> bytes:
    return json.dumps(part, ensure_ascii=False).encode() + b"\n"


async def test_the_clock_note_stays_put_across_the_model_calls_of_one_turn(rig: Rig) -> None:
    rig.server.report_cache_reuse = True
    rig.server.script(reply_tool_call("echo", {"text": "x"}), reply_text("done"))

    async def later(iteration: int, prev_tools: list[dict[str, Any]]) -> None:
        rig.clock.advance(120)  # the minute changes between the two calls of the turn

    await rig.turn("go", step_callback=later)

    first, second = rig.server.requests
    assert second.wire_messages[: len(first.wire_messages)] == first.wire_messages
    assert rig.server.cache_reuse[1] == len(prompt_bytes(first))  # all of the first call
