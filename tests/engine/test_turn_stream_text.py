"""The reply's text live (``on_text``): a streaming profile hands the model call's text to
the listener as it arrives, and a reset whenever what was shown is not the reply."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from core.agent.control import TurnControl
from core.agent.step import ReplyText, ReplyTextReset, TextEvent
from core.agent.turn import UserMessage
from tests.engine.conftest import KEY, USER, Rig
from tests.support.model_server import reply_text, reply_tool_call, reply_tool_calls


class Listener:
    """Records every event; ``shown`` is set once some text arrived."""

    def __init__(self) -> None:
        self.events: list[TextEvent] = []
        self.shown = asyncio.Event()

    def __call__(self, event: TextEvent) -> None:
        self.events.append(event)
        if isinstance(event, ReplyText):
            self.shown.set()

    def texts(self) -> list[str]:
        return [e.text for e in self.events if isinstance(e, ReplyText)]

    def resets(self) -> list[ReplyTextReset]:
        return [e for e in self.events if isinstance(e, ReplyTextReset)]


def assert_growing(events: list[TextEvent]) -> None:
    """Between resets each text extends the one before by exactly its delta."""
    before = ""
    for event in events:
        if isinstance(event, ReplyTextReset):
            before = ""
            continue
        assert event.text == before + event.delta
        assert event.delta
        before = event.text


async def test_the_listener_sees_the_text_grow_and_the_stored_reply_is_unchanged(
    rig: Rig,
) -> None:
    rig.agent(stream=True)
    listener = Listener()
    rig.server.script(
        reply_text(
            "Hello there, friend.",
            chunks=["Hello ", "there, ", "friend."],
            stall_after=2,  # role chunk, "Hello "; the rest once the listener showed it
            until=listener.shown,
        )
    )

    result = await rig.turn("hi", on_text=listener)

    assert (result.status, result.reply) == ("completed", "Hello there, friend.")
    texts = listener.texts()
    assert texts[0] == "Hello " and texts[-1] == "Hello there, friend."
    assert len(texts) >= 2
    assert_growing(listener.events)
    assert listener.resets() == []
    assert {e.iteration for e in listener.events} == {1}
    stored = await rig.stored()
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[-1].content == "Hello there, friend."


async def test_a_retried_call_resets_what_the_failed_attempt_showed(rig: Rig) -> None:
    rig.agent(stream=True)
    listener = Listener()
    rig.server.script(
        # "Hel" shown, then the connection drops: the attempt fails and is retried
        reply_text(
            "Hello", chunks=["Hel", "lo"], stall_after=2, abort_after=2, until=listener.shown
        ),
        reply_text("Hi again", chunks=["Hi ", "again"]),
    )

    result = await rig.turn("hi", on_text=listener)

    assert (result.status, result.reply) == ("completed", "Hi again")
    assert len(rig.server.requests) == 2
    first_reset = next(i for i, e in enumerate(listener.events) if isinstance(e, ReplyTextReset))
    shown_before = [e for e in listener.events[:first_reset] if isinstance(e, ReplyText)]
    assert shown_before[-1].text == "Hel"
    assert listener.resets() == [ReplyTextReset(1, "retry")]
    assert listener.texts()[-1] == "Hi again"
    assert "Hel" not in listener.texts()[-1]
    assert_growing(listener.events)


async def test_text_before_tool_calls_is_reset_and_the_next_call_streams(rig: Rig) -> None:
    rig.agent(stream=True)
    listener = Listener()
    rig.server.script(
        reply_tool_calls(
            [("call_1", "echo", {"text": "x"})],
            content="Let me check.",
            stall_after=2,
            until=listener.shown,
        ),
        reply_text("It said x."),
    )

    result = await rig.turn("hi", on_text=listener)

    assert result.reply == "It said x."
    assert listener.resets() == [ReplyTextReset(1, "tool_calls")]
    first = [e for e in listener.events if isinstance(e, ReplyText) and e.iteration == 1]
    assert first[-1].text == "Let me check."
    last = listener.events[-1]
    assert isinstance(last, ReplyText) and (last.iteration, last.text) == (2, "It said x.")
    assert_growing(listener.events)


async def test_a_stopped_call_resets_what_it_showed(rig: Rig) -> None:
    rig.agent(stream=True)
    listener = Listener()
    never = asyncio.Event()
    rig.server.script(reply_text("Half an answer", stall_after=2, until=never))
    control = TurnControl()
    message = UserMessage("hi", sender_id=USER)
    turn = asyncio.create_task(rig.agent().run_turn(KEY, message, control, on_text=listener))
    await asyncio.wait_for(listener.shown.wait(), 5)

    control.stop()
    result = await asyncio.wait_for(turn, 1)

    assert result.status == "interrupted"
    assert listener.texts() == ["Half "]
    assert listener.events[-1] == ReplyTextReset(1, "stopped")


async def test_a_hanging_listener_never_holds_the_reply(rig: Rig) -> None:
    rig.agent(stream=True)
    entered = asyncio.Event()
    rig.server.script(reply_text("one two three", stall_after=2, until=entered))

    async def stuck(event: Any) -> None:
        entered.set()
        await asyncio.Event().wait()

    started = time.monotonic()
    result = await asyncio.wait_for(rig.turn("hi", on_text=stuck), 5)

    assert result.reply == "one two three"
    assert time.monotonic() - started < 2.5  # one abandoned delivery, one bounded drain


async def test_a_failing_listener_never_changes_the_turn(rig: Rig) -> None:
    rig.agent(stream=True)
    rig.server.script(reply_tool_call("echo", {"text": "y"}), reply_text("done now"))
    calls: list[TextEvent] = []

    def broken(event: TextEvent) -> None:
        calls.append(event)
        raise RuntimeError("listener bug")

    result = await rig.turn("hi", on_text=broken)

    assert (result.status, result.reply) == ("completed", "done now")
    assert calls and isinstance(calls[-1], ReplyText) and calls[-1].text == "done now"


async def test_without_streaming_the_listener_hears_nothing(rig: Rig) -> None:
    listener = Listener()
    rig.server.script(reply_text("whole"))

    result = await rig.turn("hi", on_text=listener)

    assert result.reply == "whole"
    assert not rig.server.requests[0].body.get("stream")
    assert listener.events == []
