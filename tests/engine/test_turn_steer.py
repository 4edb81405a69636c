"""``/steer`` and redirect during a turn (seed 001 §3.3)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from core.agent.control import TurnControl
from core.agent.profile import BusyPolicy
from core.agent.steer import append_marker, format_steer_marker
from core.agent.turn import UserMessage
from core.dispatcher import Dispatcher
from core.tools.base import ToolContext, ToolResult
from core.types import ChatMessage
from tests.engine.conftest import KEY, USER, Rig, make_tool
from tests.support.model_server import reply_hang, reply_text, reply_tool_call

STEER = "\n\n[User steer during the turn]: use metric units"


def roles_and_contents(rig: Rig, index: int) -> list[tuple[str, Any]]:
    return [(m["role"], m["content"]) for m in rig.server.requests[index].messages[1:]]


def steering_tool(rig: Rig, control: TurnControl, *, redirect: bool = False) -> None:
    async def steer_me(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if redirect:
            control.redirect("actually, use Celsius")
        else:
            control.steer("use metric units")
        return ToolResult("measured")

    rig.tools.register(make_tool("measure", steer_me))


async def test_steer_lands_in_the_latest_tool_result_and_not_as_a_user_message(rig: Rig) -> None:
    control = TurnControl()
    steering_tool(rig, control)
    rig.server.script(reply_tool_call("measure", {}), reply_text("42 km"))

    await rig.turn("how far?", control=control)

    assert roles_and_contents(rig, 1) == [
        ("user", "how far?"),
        ("assistant", None),
        ("tool", "measured" + STEER),
    ]
    stored = await rig.stored()
    assert [m.role for m in stored].count("user") == 1
    assert stored[2].content == "measured" + STEER


async def test_steer_before_any_tool_result_waits_for_the_next_batch(rig: Rig) -> None:
    control = TurnControl()
    control.steer("use metric units")
    rig.server.script(reply_tool_call("echo", {"text": "x"}), reply_text("ok"))

    await rig.turn("how far?", control=control)

    assert "metric" not in str(rig.server.requests[0].messages)
    assert roles_and_contents(rig, 1)[-1] == ("tool", "echo:x" + STEER)
    assert not control.has_pending_steer


async def run_steered(
    rig: Rig, send: Callable[[Dispatcher], Awaitable[object]], policy: BusyPolicy = "queue"
) -> list[Any]:
    """One turn whose only model call is held; ``send`` acts on it, then the call ends.

    Returns what reached the model in the next request.
    """
    released = asyncio.Event()
    rig.server.script(reply_hang(reply_text("ok"), until=released), reply_text("noted"))
    dispatcher = Dispatcher(rig.agent().run_turn, policy_for=policy)
    try:
        dispatcher.submit(KEY, UserMessage("hi", sender_id=USER, sender_name="Alice"))
        await rig.server.wait_for_requests(1)
        await send(dispatcher)
        released.set()
        await asyncio.wait_for(rig.server.wait_for_requests(2), 5)
        await asyncio.wait_for(dispatcher.wait_idle(KEY), 5)
    finally:
        await dispatcher.aclose()
    return roles_and_contents(rig, 1)


async def test_steer_with_no_tool_batch_left_runs_as_the_next_turn(rig: Rig) -> None:
    async def steer(dispatcher: Dispatcher) -> None:
        assert dispatcher.steer(KEY, "use metric units")

    sent = await run_steered(rig, steer)

    assert sent[-1] == ("user", "use metric units")
    stored = await rig.stored()
    assert [(m.role, m.content) for m in stored] == [
        ("user", "hi"),
        ("assistant", "ok"),
        ("user", "use metric units"),
        ("assistant", "noted"),
    ]


async def test_steer_policy_message_left_undelivered_runs_as_the_next_turn(rig: Rig) -> None:
    async def steer_by_submit(dispatcher: Dispatcher) -> None:
        outcome = dispatcher.submit(KEY, UserMessage("in km", sender_id=USER))
        assert outcome.kind == "steered"

    sent = await run_steered(rig, steer_by_submit, "steer")

    assert sent[-1] == ("user", "in km")


async def test_redirect_during_the_final_model_call_is_stored_at_once(rig: Rig) -> None:
    released = asyncio.Event()
    rig.server.script(reply_hang(reply_text("ok"), until=released), reply_text("en français"))
    control = TurnControl()
    turn = asyncio.create_task(rig.turn("hello?", control=control))
    await rig.server.wait_for_requests(1)

    control.redirect("in French")

    await asyncio.wait_for(control.redirect_recorded.wait(), 5)
    assert not turn.done()  # the final model call is still in flight
    corrected = "hello?\n\nUser correction during the turn: in French"
    assert (await rig.stored())[0].content == corrected
    released.set()
    await asyncio.wait_for(turn, 5)
    assert control.drain_leftovers() == "in French"  # the Dispatcher runs it next


async def test_redirect_left_undelivered_runs_as_the_next_turn(rig: Rig) -> None:
    async def redirect(dispatcher: Dispatcher) -> None:
        assert dispatcher.redirect(KEY, "in French")

    sent = await run_steered(rig, redirect)

    assert sent[0] == ("user", "hi\n\nUser correction during the turn: in French")
    assert sent[-1] == ("user", "in French")


def test_steer_marker_is_a_new_text_block_for_list_content() -> None:
    message = ChatMessage(role="tool", content=[{"type": "image_url", "image_url": {"url": "u"}}])

    append_marker(message, format_steer_marker("left"))

    assert message.content == [
        {"type": "image_url", "image_url": {"url": "u"}},
        {"type": "text", "text": "\n\n[User steer during the turn]: left"},
    ]


async def test_redirect_is_folded_into_the_stored_user_message(rig: Rig) -> None:
    control = TurnControl()
    steering_tool(rig, control, redirect=True)
    rig.server.script(reply_tool_call("measure", {}), reply_text("20 °C"))

    await rig.turn("temperature?", control=control)

    corrected = "temperature?\n\nUser correction during the turn: actually, use Celsius"
    assert roles_and_contents(rig, 1) == [
        ("user", corrected),
        ("assistant", None),
        ("tool", "measured\n\n[User correction during the turn]: actually, use Celsius"),
    ]
    assert (await rig.stored())[0].content == corrected


async def test_redirect_before_any_tool_result_only_changes_the_user_message(rig: Rig) -> None:
    control = TurnControl()
    control.redirect("in French")
    rig.server.script(reply_tool_call("echo", {"text": "x"}), reply_text("ok"))

    await rig.turn("hello?", control=control)

    corrected = "hello?\n\nUser correction during the turn: in French"
    assert roles_and_contents(rig, 0) == [("user", corrected)]
    assert roles_and_contents(rig, 1)[-1] == ("tool", "echo:x")
    assert (await rig.stored())[0].content == corrected
