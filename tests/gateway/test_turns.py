"""A message in, one reply out: delivery, queueing, progress, typing, access in the flow."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from adapters.base import BadMarkup, RateLimited
from core.agent.turn import TurnResult
from core.types import TurnStatus
from gateway.control.access import AccessPolicy
from gateway.service import FAILED_REPLY, reply_text
from tests.gateway.fakes import Call, FakeAdapter, FakeClock, Person, Step
from tests.gateway.harness import ALICE, MALLORY, Gateway, GatewayFactory, with_profile


async def test_dm_message_gets_exactly_one_rendered_reply(running: GatewayFactory) -> None:
    async with running(Step("Hello **there** & <you>")) as gw:
        await gw.say(ALICE, "hi")
        await gw.idle()
        assert gw.adapter.texts() == ["Hello <b>there</b> &amp; &lt;you&gt;"]
        assert gw.adapter.of("send")[0].markup is True
        assert not gw.adapter.of("typing"), "an answer within TYPING_DELAY needs no typing"


async def test_user_text_reaches_the_model_with_the_sender(running: GatewayFactory) -> None:
    async with running(Step("ok")) as gw:
        await gw.say(ALICE, "what time is it?")
        await gw.idle()
        last = gw.model.requests[0].messages[-1]
        assert last.role == "user" and "what time is it?" in last.text()


async def test_stranger_gets_no_turn_and_one_log_line(
    running: GatewayFactory, caplog: pytest.LogCaptureFixture
) -> None:
    async with running(Step("never")) as gw:
        with caplog.at_level(logging.WARNING, logger="gateway.control.access"):
            await gw.say(MALLORY, "let me in")
            await gw.say(MALLORY, "please")
        assert gw.model.requests == [] and gw.adapter.calls == []
        hints = [r.getMessage() for r in caplog.records if "allowed_users" in r.getMessage()]
        assert hints == ["fake user 666 (Mallory) is not allowed; to allow them add '666' to "
                         "[fake] allowed_users"]  # fmt: skip


async def test_group_text_needs_a_mention(running: GatewayFactory) -> None:
    async with running(Step("answered")) as gw:
        await gw.say(ALICE, "chatter", chat_type="group", chat_id="-5")
        assert gw.model.requests == []
        await gw.say(ALICE, "@bot help me", chat_type="group", chat_id="-5", mentioned=True)
        await gw.adapter.wait_for(lambda: "answered" in gw.adapter.texts())


async def test_group_text_without_mention_answered_when_configured(
    running: GatewayFactory,
) -> None:
    policy = AccessPolicy(allowed_users=frozenset({"1"}), require_mention=False)
    async with running(Step("answered"), access=policy) as gw:
        await gw.say(ALICE, "chatter", chat_type="group", chat_id="-5")
        await gw.adapter.wait_for(lambda: "answered" in gw.adapter.texts())


async def test_messages_from_bots_are_ignored(running: GatewayFactory) -> None:
    async with running(Step("never")) as gw:
        await gw.say(Person("1", "Alice", is_bot=True), "echo")
        assert gw.model.requests == [] and gw.adapter.calls == []


async def test_second_message_is_queued_with_one_debounced_ack(running: GatewayFactory) -> None:
    first = asyncio.Event()
    async with running(Step("one", gate=first), Step("two"), Step("three")) as gw:
        await gw.say(ALICE, "first")
        await asyncio.wait_for(gw.model.called.wait(), 5)
        await gw.say(ALICE, "second")
        await gw.say(ALICE, "third")
        assert gw.adapter.texts() == ["⏳ Queued — I'll get to it after the current task."]
        first.set()
        await gw.adapter.wait_for(lambda: len(gw.adapter.texts()) == 4)
        assert gw.adapter.texts()[1:] == ["one", "two", "three"]


async def test_interrupt_policy_stops_the_turn_and_runs_the_new_message(
    running: GatewayFactory,
) -> None:
    profile = with_profile(busy_policy="interrupt")
    async with running(Step("", tools=(("slow", {}),)), Step("fresh"), profile=profile) as gw:
        await gw.say(ALICE, "long job")
        await asyncio.wait_for(gw.tool_started.wait(), 5)
        await gw.say(ALICE, "actually, this")
        await gw.adapter.wait_for(lambda: "fresh" in gw.adapter.texts())
        await gw.idle()
        assert gw.ran == []
        assert gw.adapter.texts()[0].startswith("↪️ Interrupting")
        assert gw.adapter.texts().count("fresh") == 1


async def test_progress_is_one_message_edited_then_finalized(running: GatewayFactory) -> None:
    steps = (
        Step(None, tools=(("echo", {"text": "one"}),)),
        Step(None, tools=(("echo", {"text": "two"}), ("search_web", {"query": "q"}))),
        Step("all done"),
    )
    async with running(*steps) as gw:
        await gw.say(ALICE, "work")
        await gw.idle()
        await gw.adapter.wait_for(lambda: any("Done" in t for t in gw.adapter.texts("edit")))
        sends = gw.adapter.texts()
        assert sends[0] == "⚙️ echo: one" and sends[1:] == ["all done"]
        progress = gw.adapter.of("send")[0].message
        assert {e.message for e in gw.adapter.of("edit")} == {progress}
        assert gw.adapter.texts("edit")[-1] == (
            "⚙️ echo: one\n⚙️ echo: two\n🔍 search_web: q\n✅ Done — 3 steps"
        )


async def test_markup_rejected_chunk_is_resent_as_plain_text(running: GatewayFactory) -> None:
    adapter = FakeAdapter(clock=FakeClock())
    adapter.fail("send", BadMarkup("can't parse entities"))
    async with running(Step("**bold** <tag>"), adapter=adapter) as gw:
        await gw.say(ALICE, "hi")
        await gw.idle()
        assert [(c.text, c.markup) for c in gw.adapter.of("send")] == [
            ("<b>bold</b> &lt;tag&gt;", True),
            ("bold <tag>", False),
        ]


async def test_rate_limited_reply_waits_and_arrives_once(running: GatewayFactory) -> None:
    adapter = FakeAdapter(clock=time.monotonic)
    adapter.fail("send", RateLimited(0.12), RateLimited(0.03))
    async with running(Step("patience"), adapter=adapter) as gw:
        await gw.say(ALICE, "hi")
        await gw.idle()
        assert gw.adapter.texts() == ["patience"] * 3
        first, second, third = (call.at for call in gw.adapter.of("send"))
        assert second - first >= 0.12 and third - second >= 0.03


async def test_long_reply_arrives_as_two_messages_with_the_fence_intact(
    running: GatewayFactory,
) -> None:
    code = "\n".join(f"line_{i:03d} = {i} * {i}  # squares" for i in range(170))
    reply = f"Here:\n\n```python\n{code}\n```\nThat's it."
    async with running(Step(reply)) as gw:
        await gw.say(ALICE, "long please")
        await gw.idle()
        first, second = gw.adapter.texts()
        assert first.startswith("Here:") and first.endswith("</code></pre>")
        assert second.startswith('<pre><code class="language-python">')
        assert second.endswith("That's it.")


async def test_a_bad_tool_call_still_ends_in_one_reply(running: GatewayFactory) -> None:
    async with running(Step(None, tools=(("no_such_tool", {}),)), Step("recovered")) as gw:
        await gw.say(ALICE, "go")
        await gw.idle()
        assert gw.adapter.texts()[-1] == "recovered"
        assert gw.adapter.texts().count("recovered") == 1


def test_reply_text_per_turn_outcome() -> None:
    def result(status: TurnStatus, reply: str | None) -> TurnResult:
        return TurnResult(
            turn_id="t",
            session_id="s",
            status=status,
            exit_reason="text_response",
            reply=reply,
            iterations=1,
        )

    assert reply_text(result("completed", "hi")) == "hi"
    assert reply_text(result("interrupted", "partial")) is None
    assert reply_text(result("failed", None)) == FAILED_REPLY
    assert reply_text(result("budget_exhausted", "summary")) == "summary"
    assert reply_text(result("completed", "  ")) is None


async def test_queue_command_queues_even_under_the_interrupt_policy(
    running: GatewayFactory,
) -> None:
    profile = with_profile(busy_policy="interrupt")
    async with running(
        Step("", tools=(("slow", {}),)), Step("first"), Step("second"), profile=profile
    ) as gw:
        await gw.say(ALICE, "long job")
        await asyncio.wait_for(gw.tool_started.wait(), 5)
        await gw.say(ALICE, "/queue after that")
        gw.gate.set()
        await gw.adapter.wait_for(lambda: "second" in gw.adapter.texts())
        await gw.idle()
        assert gw.ran == ["slow"]
        assert gw.adapter.texts()[0].startswith("⏳ Queued")
        assert [t for t in gw.adapter.texts() if t in ("first", "second")] == ["first", "second"]


class Ticks:
    """A sleep the test steps by hand: each sleeper waits until :meth:`tick` lets it go."""

    def __init__(self) -> None:
        self._sleepers: asyncio.Queue[asyncio.Future[None]] = asyncio.Queue()

    async def sleep(self, seconds: float) -> None:
        woken = asyncio.get_running_loop().create_future()
        await self._sleepers.put(woken)
        await woken

    async def tick(self) -> None:
        """Wait until the loop sleeps (its iteration is over), then wake it."""
        (await asyncio.wait_for(self._sleepers.get(), 5)).set_result(None)


async def typing_count_holds(gw: Gateway, ticks: Ticks) -> None:
    await ticks.tick()
    before = len(gw.adapter.of("typing"))
    await ticks.tick()
    await ticks.tick()  # at least one whole refresh went by
    assert len(gw.adapter.of("typing")) == before


def typed_before(gw: Gateway, sent: Call) -> bool:
    """Typing was shown before ``sent`` went out."""
    calls = gw.adapter.calls
    return "typing" in [c.method for c in calls[: calls.index(sent)]]


async def test_typing_pauses_while_an_approval_card_waits_and_resumes_once_answered(
    running: GatewayFactory,
) -> None:
    ticks, thinking = Ticks(), asyncio.Event()
    danger = Step(None, tools=(("danger", {"command": "rm -rf build"}),))
    async with running(danger, Step("done", gate=thinking), typing_sleep=ticks.sleep) as gw:
        await gw.say(ALICE, "clean up")
        card = await gw.card()
        assert not typed_before(gw, card)  # the card came within TYPING_DELAY
        await typing_count_holds(gw, ticks)
        paused = len(gw.adapter.of("typing"))
        await gw.press(ALICE, f"ap:{gw.service.approvals.pending()[0].id}:a", card)
        await ticks.tick()
        await ticks.tick()  # one whole refresh after the answer
        assert len(gw.adapter.of("typing")) > paused
        thinking.set()


async def test_typing_pauses_in_a_group_once_progress_is_visible(
    running: GatewayFactory,
) -> None:
    ticks = Ticks()
    steps = (Step(None, tools=(("echo", {"text": "a"}),)), Step(None, tools=(("slow", {}),)))
    async with running(*steps, Step("done"), typing_sleep=ticks.sleep) as gw:
        await gw.say(ALICE, "go", chat_type="group", chat_id="-5", mentioned=True)
        await asyncio.wait_for(gw.tool_started.wait(), 5)
        await gw.adapter.wait_sent(lambda text: "echo" in text)
        await typing_count_holds(gw, ticks)
        gw.gate.set()
