"""Streamed answers (gateway/turns/streaming.py, docs/architecture.md §13) on the test clock.

The unit tests drive one :class:`StreamedReply` through a bot's pipeline to a
:class:`FakeAdapter` on a :class:`ManualClock` (time moves only when the test says so);
the end-to-end ones run a whole gateway (harness) with a model that streams its words.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import replace

import pytest

from adapters.base import AdapterError, Capabilities, Charges, ChatRef, RateLimit, StreamingMode
from adapters.calls import Priority, Send
from core.agent.step import ModelSlow, ModelSlowEnded, ReplyText, ReplyTextReset
from core.redaction import MASK, remember_secrets
from gateway.outbound.directory import Place
from gateway.outbound.pipeline import Outbound
from gateway.outbound.scheduler import OutboundScheduler
from gateway.turns.progress import ProgressConfig, ProgressView
from gateway.turns.streaming import PLACEHOLDER, StreamedReply, Streams
from tests.gateway.fakes import TELEGRAMISH, FakeAdapter, Step, event
from tests.gateway.harness import ALICE, MALLORY, Gateway, GatewayFactory, with_profile
from tests.support.clock import TestClock

CHAT = ChatRef("fake", "100")
NATIVE = replace(TELEGRAMISH, streaming="native", stream_interval=1.0)
DRAFTS = replace(NATIVE, stream_keepalive=20.0, stream_progress=True)
EDITS = replace(TELEGRAMISH, streaming="edit", stream_interval=0.5, edit_interval=2.0)
ANSWER = "The answer is forty two, as computed by the machine."


class ManualClock:
    """A clock whose sleeps end only when :meth:`advance` passes their time."""

    def __init__(self) -> None:
        self.now = 0.0
        self._due: list[tuple[float, asyncio.Future[None]]] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._due.append((self.now + seconds, woken))
        await woken

    async def advance(self, seconds: float) -> None:
        self.now += seconds
        for due, woken in list(self._due):
            if due <= self.now + 1e-9:
                self._due.remove((due, woken))
                if not woken.done():
                    woken.set_result(None)
        await settle()


async def settle() -> None:
    """Let every ready task run (no time passes)."""
    for _ in range(20):
        await asyncio.sleep(0)


def said(text: str) -> ReplyText:
    return ReplyText(1, text, text)


def rig(
    caps: Capabilities, mode: StreamingMode = "native", first_update: float = 0.0
) -> tuple[FakeAdapter, StreamedReply, ManualClock]:
    """A stream to a fake adapter on a manual clock; its first update goes out at once
    unless ``first_update`` says otherwise (the pacing after it is what most tests see)."""
    clock = ManualClock()
    adapter = FakeAdapter(capabilities=caps, clock=clock)
    outbound = Outbound(adapter)
    assert mode != "off"
    stream = StreamedReply(
        outbound, CHAT, mode, clock=clock, sleep=clock.sleep, first_update=first_update
    )
    return adapter, stream, clock


def live(adapter: FakeAdapter) -> list[tuple[float, str]]:
    return [(c.at, c.text) for c in adapter.of("live_text:replace")]


# native -------------------------------------------------------------------------------
async def test_native_updates_at_most_once_per_stream_interval_with_growing_text() -> None:
    adapter, stream, clock = rig(NATIVE)
    stream(said("The answer "))
    await settle()
    for text in ("The answer is ", "The answer is forty ", "The answer is forty two, "):
        await clock.advance(0.3)
        stream(said(text))
        await settle()
    await clock.advance(0.3)
    stream(said(ANSWER + " More"))
    await clock.advance(1.0)
    sent = live(adapter)
    assert [t for _, t in sent] == ["The answer", "The answer is forty two,", ANSWER]
    assert all(b - a >= 1.0 for (a, _), (b, _) in itertools.pairwise(sent))
    await stream.hand_over()
    assert adapter.texts("live_text:seal") == [""]


@pytest.mark.parametrize(("caps", "mode"), [(NATIVE, "native"), (EDITS, "edit")])
async def test_an_answer_complete_before_the_first_update_would_go_out_is_never_streamed(
    caps: Capabilities, mode: StreamingMode
) -> None:
    adapter, stream, clock = rig(caps, mode, first_update=0.5)
    stream(said("The answer "))
    await clock.advance(0.3)
    stream(said(ANSWER))
    await clock.advance(0.1)
    assert await stream.hand_over() is None  # no message to edit into the answer
    await stream.clear()
    await clock.advance(5.0)
    assert adapter.calls == []  # no draft, no seal, no message: the answer goes alone


async def test_the_first_update_goes_out_first_update_after_there_was_something_to_show() -> None:
    adapter, stream, clock = rig(DRAFTS, first_update=0.5)
    stream(ReplyTextReset(1, "tool_calls"))  # nothing to show yet: the wait has not begun
    await clock.advance(2.0)
    stream.show_step("💻 terminal: sleep 5")
    await clock.advance(0.4)
    assert live(adapter) == []
    await clock.advance(0.1)
    assert live(adapter) == [(2.5, "💻 terminal: sleep 5")]
    stream(said("Slept well. "))
    await clock.advance(0.5)
    assert len(live(adapter)) == 1  # later updates keep the stream interval
    await clock.advance(0.5)
    assert live(adapter)[-1] == (3.5, "💻 terminal: sleep 5\n\nSlept well.")


async def test_native_stream_is_sent_again_every_keepalive_while_a_long_tool_runs() -> None:
    adapter, stream, clock = rig(DRAFTS)
    stream.show_step("💻 terminal: make test")
    await settle()
    await clock.advance(19.0)
    assert len(live(adapter)) == 1
    await clock.advance(1.0)
    await clock.advance(20.0)
    sent = live(adapter)
    assert [t for _, t in sent] == ["💻 terminal: make test"] * 3
    assert [at for at, _ in sent] == [0.0, 20.0, 40.0]
    await stream.clear()  # the turn stopped: cleared, and no more refreshes
    await clock.advance(40.0)
    assert [t for _, t in live(adapter)][3:] == [""]


async def test_the_progress_view_shows_steps_and_a_slow_model_inside_the_stream() -> None:
    adapter, stream, clock = rig(DRAFTS)
    view = ProgressView(
        Outbound(adapter), CHAT, ProgressConfig(mode="all"), clock=clock, sleep=clock.sleep,
        shown_by=stream.show_step,
    )  # fmt: skip
    view.step(2, [{"name": "terminal", "arguments": {"command": "make test"}, "result": "ok"}])
    await settle()
    view.notice(ModelSlow(iteration=2, attempt=1, max_attempts=3, waited=20.0))
    await clock.advance(1.0)
    view.notice(ModelSlowEnded(iteration=2))
    await clock.advance(1.0)
    stream(said("All tests pass. "))
    await clock.advance(1.0)
    step = "💻 terminal: make test"
    assert adapter.texts("live_text:replace") == [
        step,
        "⏳ The model has not answered for 20 s; still waiting. Send /stop to give up.",
        step,
        f"{step}\n\nAll tests pass.",
    ]
    await view.finish("completed")
    assert adapter.of("send") == [] and adapter.of("edit") == []  # the view sent nothing


async def test_updates_waiting_for_the_budget_are_coalesced_to_the_newest_text() -> None:
    adapter = FakeAdapter(capabilities=replace(NATIVE, stream_interval=0.0))
    adapter.holds["live_text:replace"] = held = asyncio.Event()
    scheduler = OutboundScheduler(adapter.capabilities)
    stream = StreamedReply(Outbound(adapter, scheduler=scheduler), CHAT, "native", first_update=0.0)
    stream(said("one "))
    await adapter.wait_for(lambda: len(adapter.of("live_text:replace")) == 1)
    for text in ("one two ", "one two three ", "one two three four "):
        stream(said(text))
        await settle()
    held.set()
    await adapter.wait_for(lambda: len(adapter.of("live_text:replace")) == 2)
    await settle()
    assert adapter.texts("live_text:replace") == ["one", "one two three four"]
    await stream.hand_over()
    await scheduler.aclose()


async def test_a_reset_replaces_the_stream_text() -> None:
    adapter, stream, clock = rig(NATIVE)
    stream(said("Let me look at the files "))
    await settle()
    stream(ReplyTextReset(1, "tool_calls"))
    await clock.advance(1.0)
    stream(said("Found them. "))
    await clock.advance(1.0)
    assert adapter.texts("live_text:replace") == ["Let me look at the files", "", "Found them."]


async def test_a_stream_shows_only_redacted_whole_words_within_the_length_limit() -> None:
    secret = "sk-stream-9f8e7d6c5b4a"
    remember_secrets([secret])
    adapter, stream, clock = rig(replace(NATIVE, max_text_length=20))
    stream(said(f"key {secret[:8]}"))  # a secret still arriving is held back whole
    await settle()
    stream(said(f"key {secret} ok"))
    await clock.advance(1.0)
    stream(said("x" * 30 + " and half a wo"))
    await clock.advance(1.0)
    assert adapter.texts("live_text:replace") == ["key", f"key {MASK}", "x" * 19 + PLACEHOLDER]


async def test_stream_updates_are_scheduled_at_stream_priority_coalesced_per_chat() -> None:
    seen: list[tuple[Priority, object]] = []

    async def spy(call: object, next: Callable[[object], object]) -> object:
        seen.append((call.priority, call.coalesce))  # type: ignore[attr-defined]
        return await next(call)  # type: ignore[misc]

    adapter = FakeAdapter(capabilities=NATIVE)
    outbound = Outbound(adapter, middlewares=[spy])  # type: ignore[list-item]
    stream = StreamedReply(outbound, CHAT, "native", first_update=0.0)
    stream(said("hello there "))
    await adapter.wait_for(lambda: bool(adapter.of("live_text:replace")))
    await stream.hand_over()
    assert seen[0] == (Priority.STREAM, ("stream", CHAT))
    assert seen[-1][0] == Priority.REPLY  # the seal goes with the reply


async def test_ending_a_stream_takes_no_place_in_a_window_that_counts_drafts() -> None:
    """Telegram counts drafts like messages in a chat's window (~1 a second) but makes no
    call for a seal: the answer is not held a window behind it."""
    clock = TestClock()
    caps = replace(
        NATIVE, chat_limit=RateLimit(1, 1.0), pace_clock=clock,
        charges=Charges(chat=frozenset({"send", "live"})),
    )  # fmt: skip
    adapter = FakeAdapter(capabilities=caps, clock=clock.now)
    outbound = Outbound(adapter, scheduler=OutboundScheduler(caps))
    stream = StreamedReply(outbound, CHAT, "native", first_update=0.0)
    stream(said("Hello there "))
    await adapter.wait_for(lambda: bool(adapter.of("live_text:replace")))
    await stream.hand_over()
    await outbound.perform(Send(CHAT, "Hello there, friend."))
    draft, seal, answer = (
        adapter.of(m)[0].at for m in ("live_text:replace", "live_text:seal", "send")
    )
    assert seal - draft < 1.0 <= answer - draft < 2.0  # the seal waits no window, the answer one
    await outbound.aclose()


async def test_a_failing_stream_stops_for_the_turn_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter, stream, clock = rig(NATIVE)
    adapter.fail("live_text:replace", AdapterError("fake: the network is down"))
    with caplog.at_level(logging.WARNING, logger="gateway.turns.streaming"):
        stream(said("Hello there "))
        await settle()
        for text in ("Hello there my ", "Hello there my friend "):
            stream(said(text))
            await clock.advance(1.0)
        assert await stream.hand_over() is None
    assert len(adapter.of("live_text:replace")) == 1 and adapter.of("live_text:seal") == []
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


# refusal and edit mode ------------------------------------------------------------------
async def test_a_refused_native_stream_falls_back_to_edits_once_with_one_info_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    adapter = FakeAdapter(capabilities=NATIVE, clock=clock)
    adapter.refuse_streams()
    streams = Streams(clock=clock, sleep=clock.sleep, first_update=0.0)
    place = Place(Outbound(adapter), CHAT)
    with caplog.at_level(logging.INFO, logger="gateway.turns.streaming"):
        first = streams.open("fake:dm:100", place)
        assert first is not None and first.mode == "native"
        first(said("Hello there "))
        await adapter.wait_for(lambda: bool(adapter.of("send")))
        assert str(first.mode) == "edit" and await first.hand_over() is not None
        second = streams.open("fake:dm:100", place)
        assert second is not None and second.mode == "edit"
        second(said("Again here "))
        await adapter.wait_for(lambda: len(adapter.of("send")) == 2)
        await second.hand_over()
    assert len(adapter.of("live_text:replace")) == 1  # refused once, never asked again
    assert [c.markup for c in adapter.of("send")] == [False, False]
    refusals = [r for r in caplog.records if "refused a native stream" in r.getMessage()]
    assert len(refusals) == 1 and refusals[0].levelno == logging.INFO


async def test_edit_mode_sends_then_edits_no_faster_than_the_edit_interval() -> None:
    adapter, stream, clock = rig(EDITS, "edit")
    stream(said("One "))
    await settle()
    words = {
        0.5: "One two ",
        1.0: "One two three ",
        1.5: "One two three four ",
        2.5: "One two three four five ",
    }
    for tick in range(1, 9):
        await clock.advance(0.5)
        if tick * 0.5 in words:
            stream(said(words[tick * 0.5]))
            await settle()
    assert adapter.texts("send") == ["One"]
    edits = [(e.at, e.text) for e in adapter.of("edit")]
    assert edits == [(2.0, "One two three four"), (4.0, "One two three four five")]
    message = await stream.hand_over()
    assert message == adapter.of("send")[0].message


async def test_edit_mode_shows_a_placeholder_after_a_reset_and_deletes_when_cleared() -> None:
    adapter, stream, clock = rig(EDITS, "edit")
    stream(said("Checking "))
    await settle()
    stream(ReplyTextReset(1, "tool_calls"))
    await clock.advance(2.0)
    assert adapter.texts("edit") == [PLACEHOLDER]
    await stream.clear()
    assert [c.message for c in adapter.of("delete")] == [adapter.of("send")[0].message]


# through the gateway ---------------------------------------------------------------------
def streaming_adapter(caps: Capabilities) -> FakeAdapter:
    return FakeAdapter(capabilities=caps)


def on_the_clock(gw: Gateway) -> Gateway:
    gw.adapter.clock = gw.clock
    gw.model.pause = gw.clock.sleep
    return gw


def step_shown(adapter: FakeAdapter) -> list[bool]:
    """Per native stream update: it shows the ``slow`` tool's step line."""
    return [t.startswith("⚙️ slow") for t in adapter.texts("live_text:replace")]


def streaming_profile() -> dict[str, object]:
    """A profile whose model calls stream (the engine then feeds ``on_text``)."""
    return {"profile": with_profile(stream=True)}


async def test_a_native_stream_is_sealed_then_the_answer_is_sent_once(
    running: GatewayFactory,
) -> None:
    adapter = streaming_adapter(NATIVE)
    async with running(Step(ANSWER, streamed=True), adapter=adapter, **streaming_profile()) as gw:
        on_the_clock(gw)
        await gw.say(ALICE, "what is it?")
        await gw.idle()
        shown = adapter.texts("live_text:replace")
        assert shown and all(ANSWER.startswith(t) for t in shown)
        assert adapter.texts("live_text:seal") == [""]
        assert adapter.texts() == [ANSWER]
        names = [c.method for c in adapter.calls if c.method != "typing"]
        assert names.index("live_text:seal") < names.index("send")


async def test_edit_mode_message_becomes_the_first_reply_chunk(running: GatewayFactory) -> None:
    adapter = streaming_adapter(replace(EDITS, edit_interval=0.5))
    async with running(Step(ANSWER, streamed=True), adapter=adapter, **streaming_profile()) as gw:
        on_the_clock(gw)
        await gw.say(ALICE, "what is it?")
        await gw.idle()
        (sent,) = adapter.of("send")
        assert sent.markup is False and ANSWER.startswith(sent.text)
        final = adapter.of("edit")[-1]
        assert final.message == sent.message and final.text == ANSWER and final.markup


async def test_a_refused_stream_answers_once_by_edits_and_later_turns_edit_at_once(
    running: GatewayFactory, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = streaming_adapter(replace(NATIVE, edit_interval=0.5))
    adapter.refuse_streams()
    steps = (Step(ANSWER, streamed=True), Step("Second answer here.", streamed=True))
    async with running(*steps, adapter=adapter, **streaming_profile()) as gw:
        on_the_clock(gw)
        with caplog.at_level(logging.INFO, logger="gateway.turns.streaming"):
            for text in ("what is it?", "and again?"):
                await gw.say(ALICE, text)
                await gw.idle()
        assert len(adapter.of("live_text:replace")) == 1  # refused once, then edits
        first, second = adapter.of("send")
        finals = {e.message: e.text for e in adapter.of("edit")}
        assert finals == {first.message: ANSWER, second.message: "Second answer here."}
        assert adapter.texts("live_text:seal") == []
    assert sum("refused a native stream" in r.getMessage() for r in caplog.records) == 1


async def test_stream_progress_shows_the_tool_step_inside_the_stream_and_no_message(
    running: GatewayFactory,
) -> None:
    adapter = streaming_adapter(replace(DRAFTS, stream_keepalive=None))
    steps = (Step(None, tools=(("echo", {"text": "hi"}),)), Step(ANSWER, streamed=True))
    async with running(*steps, adapter=adapter, **streaming_profile()) as gw:
        on_the_clock(gw)
        await gw.say(ALICE, "echo it")
        await gw.idle()
        shown = adapter.texts("live_text:replace")
        assert any(t.startswith("⚙️ echo") for t in shown)
        assert any(t.startswith("⚙️ echo") and "The answer" in t for t in shown)
        assert adapter.texts() == [ANSWER]  # no progress message, the answer once


async def test_a_stopped_turn_clears_the_stream_and_sends_no_answer(
    running: GatewayFactory,
) -> None:
    # The text before the tool call is reset when the call ends (it may never be drawn:
    # the model's words move the test clock past the first update before the stream's
    # task has run), so what the stream shows while the tool waits is its step line.
    adapter = streaming_adapter(replace(NATIVE, stream_progress=True))
    steps = (Step("Let me wait for it ", tools=(("slow", {}),), streamed=True), Step("never"))
    async with running(*steps, adapter=adapter, **streaming_profile()) as gw:
        on_the_clock(gw)
        await gw.say(ALICE, "long job")
        await asyncio.wait_for(gw.tool_started.wait(), 5)
        await adapter.wait_for(lambda: any(step_shown(adapter)))
        await gw.say(ALICE, "/stop")
        await gw.idle()
        assert adapter.texts("live_text:replace")[-1] == ""
        assert adapter.texts("live_text:seal") == []
        assert adapter.texts() == ["⏹ Stopped."]


async def test_native_stop_ends_the_running_turn_with_one_notice(running: GatewayFactory) -> None:
    adapter = streaming_adapter(NATIVE)
    async with running(Step(None, tools=(("slow", {}),)), Step("never"), adapter=adapter) as gw:
        await gw.say(ALICE, "long job")
        await asyncio.wait_for(gw.tool_started.wait(), 5)
        await gw.service.inbound(replace(event(ALICE), kind="stop", text="", stream_id="d1"))
        await gw.idle()
        assert gw.ran == [] and adapter.texts() == ["⏹ Stopped."]


async def test_a_native_stop_from_someone_not_allowed_changes_nothing(
    running: GatewayFactory,
) -> None:
    async with running(Step(None, tools=(("slow", {}),)), Step("done.")) as gw:
        await gw.say(ALICE, "long job")
        await asyncio.wait_for(gw.tool_started.wait(), 5)
        alices = event(ALICE).session_key  # a stop on Alice's stream, pressed by a stranger
        stranger = replace(event(MALLORY), kind="stop", stream_id="d1", session_key=alices)
        await gw.service.inbound(stranger)
        assert gw.service.dispatcher.status(str(alices)).running
        gw.gate.set()
        await gw.idle()
        assert gw.ran == ["slow"] and gw.adapter.texts()[-1] == "done."
        assert "⏹ Stopped." not in gw.adapter.texts()


async def test_native_stop_with_nothing_running_does_nothing(running: GatewayFactory) -> None:
    async with running() as gw:
        await gw.service.inbound(replace(event(ALICE), kind="stop", stream_id="d1"))
        assert gw.adapter.texts() == [] and gw.adapter.of("send") == []


async def test_streaming_off_sends_no_stream(running: GatewayFactory) -> None:
    async with running(Step(ANSWER, streamed=True), **streaming_profile()) as gw:
        on_the_clock(gw)
        await gw.say(ALICE, "what is it?")
        await gw.idle()
        assert not [c for c in gw.adapter.calls if c.method.startswith("live_text")]
        assert gw.adapter.texts() == [ANSWER]


def test_streams_open_none_where_the_chat_keeps_the_whole_reply() -> None:
    streams = Streams()
    for caps in (TELEGRAMISH, replace(NATIVE, live_text=True), replace(EDITS, supports_edit=False)):
        place = Place(Outbound(FakeAdapter(capabilities=caps)), CHAT)
        assert streams.open("fake:dm:100", place) is None
