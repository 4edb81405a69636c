"""Approval cards in Block Kit: Approve (primary) / Deny (danger) / Always, the approval id
in each button's value; a stranger's press is refused ephemerally, the requester's
resolves the card, a stale press hears "Already decided.", a timeout expires the card."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from tests.platform_sim.base import SimMessage
from tests.platform_sim.slack_sim import ALICE, BOB, GENERAL, SlackSim
from tests.slack.conftest import GatewayFactory
from tests.slack.harness import MODES, thread_key
from tests.support.model_replies import reply_text, reply_tool_call
from tests.support.model_server import ScriptedModelServer

RISKY = {"command": "rm -rf ./build"}


def is_card(message: SimMessage) -> bool:
    return "Approval needed" in message.text and bool(message.buttons)


async def ask_for_approval(sim: SlackSim) -> tuple[SimMessage, SimMessage]:
    asked = await sim.user_says(GENERAL, f"{sim.mention} clean the build")
    card = await sim.wait_for_bot_message(GENERAL, is_card)
    return asked, card


@pytest.mark.parametrize("mode", MODES)
async def test_stranger_is_refused_ephemerally_and_the_requester_resolves_the_card(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    mode: str,
) -> None:  # fmt: skip
    model_server.script(reply_tool_call("terminal", RISKY), reply_text("cleaned"))
    run = await slack_gateway(mode)
    asked, card = await ask_for_approval(slack_sim)
    assert card.thread == asked.id
    actions = [el for b in card.raw["blocks"] if b["type"] == "actions" for el in b["elements"]]
    styles = {el["text"]["text"]: el.get("style") for el in actions}
    assert styles == {
        "✅ Approve": "primary",
        "❌ Deny": "danger",
        "✅ Always (this session)": None,
    }
    approval_id = card.button("✅ Approve").data.split(":")[1]  # type: ignore[union-attr]
    stale = replace(card, raw=copy.deepcopy(card.raw))

    await slack_sim.press_button(card, card.button("✅ Approve").data or "", user=BOB)
    refusal = await slack_sim.wait_for(lambda: slack_sim.ephemerals)
    assert [(e["user"], e["thread_ts"]) for e in refusal] == [(BOB.id, asked.id)]
    assert approval_id not in refusal[0]["text"] and "rm -rf" not in refusal[0]["text"]
    assert card.buttons  # still undecided

    await slack_sim.press_button(card, card.button("✅ Approve").data or "", user=ALICE)
    await slack_sim.wait_for(lambda: "Approved by alice" in card.text and not card.buttons)
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "cleaned")
    await run.idle(thread_key(GENERAL, asked.id))

    await slack_sim.press_button(stale, stale.button("✅ Approve").data or "", user=ALICE)
    late = await slack_sim.wait_for(lambda: slack_sim.ephemerals[1:])
    assert [(e["user"], e["text"]) for e in late] == [(ALICE.id, "Already decided.")]


async def test_an_unanswered_card_expires_and_says_so(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(reply_tool_call("terminal", RISKY), reply_text("not run then"))
    run = await slack_gateway("socket", profile={"approval_timeout": 0.3})
    asked, card = await ask_for_approval(slack_sim)
    await slack_sim.wait_for(lambda: "Expired" in card.text and not card.buttons)
    await slack_sim.wait_for_bot_message(GENERAL, lambda m: m.text == "not run then")
    await run.idle(thread_key(GENERAL, asked.id))
    tool_result = model_server.requests[1].messages[-1]
    assert "Not approved (timed_out)" in str(tool_result["content"])
