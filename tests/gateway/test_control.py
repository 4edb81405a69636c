"""The control plane: commands and button presses act at once, on the right request."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

from core.approver import ApprovalRequest
from core.redaction import remember_secrets
from core.store.base import ApprovalRecord
from core.store.sqlite import open_store
from gateway.control.commands import ChatCommands
from gateway.control.syntax import COMMANDS, ChoicePress, parse_press
from gateway.inbound.dispatch import Router
from tests.gateway.fakes import Call, FakeAdapter, Step, event
from tests.gateway.harness import (
    ALICE,
    BOB,
    CAROL,
    MALLORY,
    Gateway,
    GatewayFactory,
    with_profile,
)
from tests.support.model_replies import CLOCK_NOTE

DANGER = Step(None, tools=(("danger", {"command": "rm -rf build"}),))
DANGER_DIST = Step(None, tools=(("danger", {"command": "rm -rf dist"}),))
SLOW = Step(None, tools=(("slow", {}),))


def payloads(card: object) -> list[str]:
    return [b.data for row in card.buttons for b in row]  # type: ignore[attr-defined]


def clarify(question: str, choices: list[str]) -> Step:
    """A model step asking the user to pick one of ``choices``."""
    return Step(None, tools=(("clarify", {"question": question, "choices": choices}),))


async def card_for(gw: Gateway, text: str) -> Call:
    """Alice says ``text``; the (first) card it brings up."""
    await gw.say(ALICE, text)
    return await gw.card()


async def ask(gw: Gateway, text: str) -> tuple[Call, ApprovalRequest]:
    """Alice says ``text``; the card it brings up and the one request pending."""
    card = await card_for(gw, text)
    (request,) = gw.service.approvals.pending()
    return card, request


async def in_a_tool(gw: Gateway) -> None:
    """Alice starts a long job; returns once its tool is running."""
    await gw.say(ALICE, "long job")
    await asyncio.wait_for(gw.tool_started.wait(), 5)


async def test_stop_with_nothing_running_says_so(running: GatewayFactory) -> None:
    async with running() as gw:
        await gw.say(ALICE, "/stop")
        assert gw.adapter.texts() == ["Nothing to stop."]


async def test_stop_during_model_call_ends_turn_with_one_stopped_notice(
    running: GatewayFactory,
) -> None:
    hung = asyncio.Event()
    async with running(Step("too late", gate=hung)) as gw:
        await gw.say(ALICE, "think hard")
        await asyncio.wait_for(gw.model.called.wait(), 5)
        await gw.say(ALICE, "/stop")
        await gw.idle()
        assert gw.adapter.texts() == ["⏹ Stopped."]
        session = await gw.store.get_active_session("fake:dm:100")
        assert session is not None
        turns = await gw.store.list_turns(session.id)
        assert [t.status for t in turns] == ["interrupted"]


async def test_stop_during_a_tool_ends_the_turn(running: GatewayFactory) -> None:
    async with running(SLOW, Step("never")) as gw:
        await in_a_tool(gw)
        await gw.say(ALICE, "/stop")
        await gw.idle()
        assert gw.ran == [] and "never" not in gw.adapter.texts()
        assert gw.adapter.texts().count("⏹ Stopped.") == 1


async def test_stop_during_pending_approval_cancels_it_and_settles_the_card(
    running: GatewayFactory,
) -> None:
    async with running(DANGER, Step("never")) as gw:
        card = await card_for(gw, "clean up")
        await gw.say(ALICE, "/stop")
        await gw.idle()
        settled = await gw.settled(card)
        assert settled.text.endswith("⏹ Cancelled") and settled.buttons == ()
        assert gw.ran == [] and gw.service.approvals.pending() == []


async def test_approval_card_buttons_carry_the_approval_id_within_64_bytes(
    running: GatewayFactory,
) -> None:
    async with running(DANGER, Step("done")) as gw:
        card, request = await ask(gw, "clean up")
        assert payloads(card) == [f"ap:{request.id}:a", f"ap:{request.id}:d", f"ap:{request.id}:s"]
        assert all(len(p.encode()) <= 64 for p in payloads(card))
        assert "fake:dm" not in "".join(payloads(card))
        assert "danger" in card.text and "rm -rf build" in card.text and "Alice" in card.text


async def test_stranger_press_is_refused_and_the_requester_press_resolves(
    running: GatewayFactory,
) -> None:
    async with running(DANGER, Step("cleaned")) as gw:
        card = await card_for(gw, "clean up")
        approve = payloads(card)[0]
        bob = await gw.press(BOB, approve, card)
        mallory = await gw.press(MALLORY, approve, card)
        assert bob.text.startswith("Sorry — only the person who asked")
        assert mallory.text.startswith("Sorry — you are not allowed")
        assert len(gw.service.approvals.pending()) == 1 and gw.ran == []
        alice = await gw.press(ALICE, approve, card)
        assert alice.text == ""
        await gw.idle()
        assert gw.ran == ["danger rm -rf build"]
        settled = await gw.settled(card)
        assert settled.text.endswith("✅ Approved by Alice") and settled.buttons == ()
        assert gw.adapter.texts()[-1] == "cleaned"


async def test_configured_approver_may_answer_for_someone_else(running: GatewayFactory) -> None:
    async with running(DANGER, Step("no")) as gw:
        card = await card_for(gw, "clean up")
        await gw.press(CAROL, payloads(card)[1], card)
        await gw.idle()
        assert gw.ran == []
        assert (await gw.settled(card)).text.endswith("❌ Denied by Carol")


async def test_stale_press_says_already_decided_and_leaves_the_newer_request(
    running: GatewayFactory,
) -> None:
    async with running(DANGER, DANGER_DIST, Step("done")) as gw:
        await gw.say(ALICE, "clean up")
        old = await gw.card(0)
        await gw.press(ALICE, payloads(old)[0], old)
        new = await gw.card(1)
        stale = await gw.press(ALICE, payloads(old)[0], old)
        assert stale.text == "Already decided."
        (pending,) = gw.service.approvals.pending()
        assert (
            f"ap:{pending.id}:a" in payloads(new) and pending.arguments["command"] == "rm -rf dist"
        )
        assert gw.ran == ["danger rm -rf build"]


async def test_every_press_is_answered_exactly_once(running: GatewayFactory) -> None:
    async with running() as gw:
        for data in ("garbage", "ap:nope:a", "ch:nope:7", "ap::a"):
            await gw.service.inbound(event(ALICE, button=data))
        await gw.service.inbound(event(MALLORY, button="ap:nope:a"))
        answers = [c.text for c in gw.adapter.of("answer")]
        assert answers == [
            "This button is no longer valid.",
            "No such pending request.",
            "No such pending request.",
            "This button is no longer valid.",
            "Sorry — you are not allowed to use this bot.",
        ]


async def test_approval_timeout_edits_the_card_to_expired(running: GatewayFactory) -> None:
    async with running(DANGER, Step("gave up"), profile=with_profile(approval_timeout=0.05)) as gw:
        card = await card_for(gw, "clean up")
        await gw.idle()
        settled = await gw.settled(card)
        assert settled.text.endswith("⌛ Expired — no action taken") and settled.buttons == ()
        assert gw.ran == []


async def test_approve_without_id_resolves_the_oldest_pending_of_own_session(
    running: GatewayFactory,
) -> None:
    async with running(DANGER, Step("done")) as gw:
        await card_for(gw, "clean up")
        await gw.say(ALICE, "/approve")
        await gw.idle()
        assert "✅ Approved." in gw.adapter.texts() and gw.ran == ["danger rm -rf build"]


async def test_deny_with_id_and_reason_reaches_the_model(running: GatewayFactory) -> None:
    async with running(DANGER, Step("understood")) as gw:
        card, request = await ask(gw, "clean up")
        await gw.say(ALICE, f"/deny {request.id[:8]} not on Fridays")
        await gw.idle()
        assert "❌ Denied." in gw.adapter.texts() and gw.ran == []
        tool_result = gw.model.requests[-1].messages[-1].text()
        assert tool_result == "Not approved (denied): not on Fridays"
        assert (await gw.settled(card)).text.endswith("❌ Denied by Alice: not on Fridays")


async def test_approve_with_a_stale_id_never_approves_a_newer_request(
    running: GatewayFactory,
) -> None:
    async with running(DANGER, Step("done")) as gw:
        await card_for(gw, "clean up")
        await gw.say(ALICE, "/approve zzzzzzzz")
        assert "No such pending request." in gw.adapter.texts()
        assert len(gw.service.approvals.pending()) == 1


async def test_approve_with_nothing_pending(running: GatewayFactory) -> None:
    async with running() as gw:
        await gw.say(ALICE, "/approve")
        await gw.say(ALICE, "/deny because")
        assert gw.adapter.texts() == ["No pending request.", "No pending request."]


async def test_choice_buttons_answer_clarify(running: GatewayFactory) -> None:
    async with running(clarify("Colour?", ["red", "green"]), Step("green it is")) as gw:
        card, request = await ask(gw, "paint")
        assert [b.label for row in card.buttons for b in row] == ["red", "green"]
        assert payloads(card) == [f"ch:{request.id}:0", f"ch:{request.id}:1"]
        await gw.press(ALICE, payloads(card)[1], card)
        await gw.idle()
        assert gw.model.requests[-1].messages[-1].text() == "green"
        assert (await gw.settled(card)).text.endswith("✅ Alice chose: green")


async def test_steer_during_a_tool_reaches_the_next_model_request(
    running: GatewayFactory,
) -> None:
    async with running(SLOW, Step("steered")) as gw:
        await in_a_tool(gw)
        await gw.say(ALICE, "/steer use python")
        assert gw.adapter.texts() == ["⏩ Steer queued — lands after the current tool."]
        gw.gate.set()
        await gw.idle()
        assert "use python" in gw.model.requests[-1].messages[-1].text()
        assert gw.adapter.texts()[-1] == "steered"


async def test_steer_without_a_running_turn_becomes_an_ordinary_message(
    running: GatewayFactory,
) -> None:
    async with running(Step("sure")) as gw:
        await gw.say(ALICE, "/steer use python")
        await gw.idle()
        assert CLOCK_NOTE.sub("", gw.model.requests[0].messages[-1].text()) == "use python"
        assert gw.adapter.texts() == ["sure"]


async def test_redirect_during_a_turn_is_acknowledged(running: GatewayFactory) -> None:
    async with running(SLOW, Step("redirected")) as gw:
        await in_a_tool(gw)
        await gw.say(ALICE, "/redirect only the docs folder")
        assert gw.adapter.texts()[0].startswith("↪️ Redirect queued")
        gw.gate.set()
        await gw.idle()
        sent = " ".join(m.text() for m in gw.model.requests[-1].messages)
        assert "only the docs folder" in sent


async def test_new_ends_the_session_so_the_next_message_starts_fresh(
    running: GatewayFactory,
) -> None:
    async with running(Step("first answer"), Step("second answer")) as gw:
        await gw.say(ALICE, "remember the number 98765")
        await gw.idle()
        before = await gw.store.get_active_session("fake:dm:100")
        await gw.say(ALICE, "/new")
        assert gw.adapter.texts()[-1].startswith("🆕")
        await gw.say(ALICE, "what number?")
        await gw.idle()
        after = await gw.store.get_active_session("fake:dm:100")
        assert before is not None and after is not None and before.id != after.id
        history = " ".join(m.text() for m in gw.model.requests[-1].messages)
        assert "98765" not in history


async def test_status_reports_work_queue_and_waiting_approval(running: GatewayFactory) -> None:
    async with running(DANGER, Step("x"), Step("y")) as gw:
        await gw.say(BOB, "/status")
        await card_for(gw, "clean up")
        await gw.say(ALICE, "and then this")
        await gw.say(ALICE, "/status")
        (request,) = gw.service.approvals.pending()
        assert gw.adapter.texts()[0] == "💤 Idle"
        assert gw.adapter.texts()[-1] == (
            f"🟢 Working · 1 queued · 1 approval(s) waiting: {request.id[:8]}"
        )


async def test_help_lists_every_command_and_the_menu_is_exposed(running: GatewayFactory) -> None:
    async with running() as gw:
        await gw.say(ALICE, "/help@my_bot")
        assert all(f"/{c.name}" in gw.adapter.texts()[0] for c in COMMANDS)
        names = [c.name for c in gw.service.router.commands]
        assert names[:4] == ["start", "help", "new", "stop"] and "approve" in names


async def test_unknown_command_is_answered(running: GatewayFactory) -> None:
    async with running() as gw:
        await gw.say(ALICE, "/frobnicate")
        assert gw.adapter.texts() == [
            "Unknown command /frobnicate — /help lists what I understand."
        ]


def test_button_payloads_parse_strictly() -> None:
    assert parse_press("ap:abc:a") is not None and parse_press("ap:abc:s").always  # type: ignore[union-attr]
    assert parse_press("ch:abc:2").index == 2  # type: ignore[union-attr]
    for bad in (None, "", "ap:abc:x", "ap::a", "ch:abc:two", "zz:abc:a", "ap:abc"):
        assert parse_press(bad) is None


async def test_start_closes_approvals_a_crashed_run_left_pending(
    tmp_path: Path, running: GatewayFactory
) -> None:
    store = await open_store(tmp_path / "gateway.db")
    session = await store.create_session("fake:dm:100", "default")
    await store.start_turn(session.id, "t1")
    record = ApprovalRecord("old-id-123", session.id, "fake:dm:100", "t1", "danger", "{}", "?", 1.0)
    await store.create_approval(record)
    await store.close()
    async with running() as gw:
        old = await gw.store.get_approval("old-id-123")
        assert old is not None and old.state == "cancelled"
        turn = await gw.store.get_turn("t1")
        assert turn is not None and turn.status == "failed"
        await gw.service.inbound(event(ALICE, button="ap:old-id-123:a"))
        assert [c.text for c in gw.adapter.of("answer")] == [
            "Cancelled: the gateway restarted before this was answered."
        ]


async def test_deny_with_a_stale_short_or_full_id_says_already_decided_not_a_newer_one(
    running: GatewayFactory,
) -> None:
    async with running(DANGER, DANGER_DIST, Step("done")) as gw:
        await gw.say(ALICE, "clean up")
        old = await gw.card(0)
        (first,) = gw.service.approvals.pending()
        await gw.press(ALICE, payloads(old)[0], old)
        await gw.card(1)
        await gw.say(ALICE, f"/deny {first.id[:8]} changed my mind")
        await gw.say(ALICE, f"/deny {first.id}")
        assert gw.adapter.texts()[-2:] == ["Already decided.", "Already decided."]
        (newer,) = gw.service.approvals.pending()
        assert newer.arguments["command"] == "rm -rf dist"


async def test_stop_racing_the_final_reply_sends_stopped_and_no_reply(
    running: GatewayFactory,
) -> None:
    ending, release = asyncio.Event(), asyncio.Event()

    async def linger(**_: object) -> None:
        ending.set()
        await release.wait()

    async with running(Step("the whole answer")) as gw:
        gw.service.agents["default"].hooks.register("on_session_end", linger)
        await gw.say(ALICE, "quick question")
        await asyncio.wait_for(ending.wait(), 5)  # the reply exists; the turn is still live
        await gw.say(ALICE, "/stop")
        release.set()
        await gw.idle()
        assert gw.adapter.texts() == ["⏹ Stopped."]


async def test_a_malformed_choice_payload_gets_a_polite_answer(running: GatewayFactory) -> None:
    async with running() as gw:
        for data in ("ch:x:²", "ch:x:٣", "ch:x:-1", "ap:x:zz"):
            await gw.service.inbound(event(ALICE, button=data))
        answers = [c.text for c in gw.adapter.of("answer")]
        assert answers == ["This button is no longer valid."] * 4


def test_parse_press_never_raises_on_unicode_digits() -> None:
    assert parse_press("ch:abc:²") is None
    assert parse_press("ch:abc:12") == ChoicePress("abc", 12)


async def test_deny_with_a_short_reason_denies_the_own_pending_request(
    running: GatewayFactory,
) -> None:
    async with running(DANGER, Step("ok")) as gw:
        await card_for(gw, "clean up")
        await gw.say(ALICE, "/deny not now")
        await gw.idle()
        assert "❌ Denied." in gw.adapter.texts() and gw.ran == []


# who may answer ----------------------------------------------------------------------


async def test_a_stranger_pressing_a_missing_choice_is_refused_before_any_check(
    running: GatewayFactory,
) -> None:
    async with running(clarify("Colour?", ["red", "green"]), Step("ok")) as gw:
        card, request = await ask(gw, "paint")
        refused = await gw.press(BOB, f"ch:{request.id}:99", card)
        assert refused.text.startswith("Sorry — only the person who asked")
        invalid = await gw.press(ALICE, f"ch:{request.id}:99", card)
        assert invalid.text == "That is not one of the options — use the buttons."


async def test_an_id_prefix_never_reveals_another_sessions_request(
    running: GatewayFactory,
) -> None:
    async with running(DANGER, Step("done")) as gw:
        _, request = await ask(gw, "clean up")
        await gw.say(BOB, f"/approve {request.id[:6]}", chat_id="200")
        await gw.say(BOB, f"/deny {request.id[:8]}", chat_id="200")
        assert gw.adapter.texts()[-2:] == ["No such pending request."] * 2
        assert gw.service.approvals.pending() == [request]
        await gw.say(CAROL, f"/approve {request.id[:6]}", chat_id="300")  # an approver may
        await gw.idle()
        assert "✅ Approved." in gw.adapter.texts() and gw.ran == ["danger rm -rf build"]


async def test_the_same_user_id_on_another_platform_can_neither_approve_nor_ask(
    running: GatewayFactory,
) -> None:
    other = FakeAdapter(platform="other")
    async with running(DANGER, Step("done"), elsewhere=other) as gw:
        card, request = await ask(gw, "clean up")
        for who in (CAROL, ALICE):  # fake's approver, and the requester, by bare id
            press = event(who, button=f"ap:{request.id}:a", on=card.message, platform="other")
            await gw.service.inbound(press)
        answers = [c.text for c in other.of("answer")]
        assert all(a.startswith("Sorry — only the person who asked") for a in answers)
        assert len(answers) == 2 and gw.service.approvals.pending() == [request]
        await gw.press(CAROL, f"ap:{request.id}:a", card)  # on fake, Carol approves
        await gw.idle()
        assert gw.ran == ["danger rm -rf build"]


async def test_clarify_cards_redact_the_question_choices_and_answer(
    running: GatewayFactory,
) -> None:
    secret = "sk-clarify-configured-key-1234"
    remember_secrets([secret])
    question = f"Which key, {secret} or the other?"
    choices = [f"use {secret}", "password=hunter2"]  # not configured: shown as written
    async with running(clarify(question, choices), Step("ok")) as gw:
        card = await card_for(gw, "set up")
        labels = [b.label for row in card.buttons for b in row]
        await gw.press(ALICE, payloads(card)[0], card)
        settled = await gw.settled(card)
        shown = " ".join([card.text, *labels, settled.text])
        assert secret not in shown
        assert labels == ["use ***", "password=hunter2"]
        assert settled.text.endswith("✅ Alice chose: use ***")


def test_the_router_and_commands_share_the_services_stopped_turns_and_delivery() -> None:
    """No private defaults: a Router or ChatCommands with its own stopped turns would lose
    /stop's reply suppression."""
    for built, names in ((Router, ("delivery", "stopped")), (ChatCommands, ("stopped",))):
        parameters = inspect.signature(built).parameters
        assert all(parameters[n].default is inspect.Parameter.empty for n in names)
