"""A button's colour on Discord comes from its role, never from its payload."""

from __future__ import annotations

import pytest

from adapters.base import Button, ButtonRole
from adapters.discord.interactions import view_of
from tests.discord.conftest import GatewayFactory
from tests.discord.harness import dm_key
from tests.platform_sim.base import SimMessage
from tests.platform_sim.discord_sim import ALICE, DiscordSim
from tests.support.model_replies import reply_text, reply_tool_call
from tests.support.model_server import ScriptedModelServer

SUCCESS, SECONDARY, DANGER = 3, 2, 4
"""Discord's button style numbers on the wire (green, grey, red)."""


def wire_styles(*buttons: Button) -> dict[str, int]:
    view = view_of([list(buttons)])
    assert view is not None
    [row] = view.to_components()
    return {item["custom_id"]: item["style"] for item in row["components"]}


@pytest.mark.parametrize(
    ("role", "style"),
    [("approve", SUCCESS), ("always", SUCCESS), ("deny", DANGER), ("stop", DANGER),
     ("choice", SECONDARY)],
)  # fmt: skip
async def test_a_role_gives_its_colour_whatever_the_payload(role: ButtonRole, style: int) -> None:
    assert wire_styles(Button("x", "xyz", role=role)) == {"xyz": style}


async def test_an_approval_shaped_payload_without_a_role_is_a_plain_choice() -> None:
    styles = wire_styles(Button("a", "ap:1:d"), Button("b", "st:1"), Button("c", "ap:1:a"))
    assert styles == {"ap:1:d": SECONDARY, "st:1": SECONDARY, "ap:1:a": SECONDARY}


def styles_shown(message: SimMessage) -> dict[str, int]:
    rows = message.raw.get("components", [])
    return {item["label"]: item["style"] for row in rows for item in row["components"]}


async def test_the_gateways_stop_and_card_buttons_reach_discord_in_their_colours(
    gateway: GatewayFactory, discord_sim: DiscordSim, model_server: ScriptedModelServer
) -> None:
    model_server.script(
        reply_tool_call("terminal", {"command": "true"}, id="c1"),
        reply_tool_call("terminal", {"command": "rm -rf ./build"}, id="c2"),
        reply_text("left alone"),
    )
    run = await gateway()
    dm = discord_sim.dm_channel(ALICE).id
    await discord_sim.user_says(dm, "do the work")
    progress = await discord_sim.wait_for_bot_message(dm, lambda m: "⏹ Stop" in styles_shown(m))
    card = await discord_sim.wait_for_bot_message(dm, lambda m: "Approval needed" in m.text)
    assert styles_shown(progress)["⏹ Stop"] == DANGER
    assert styles_shown(card) == {
        "✅ Approve": SUCCESS,
        "❌ Deny": DANGER,
        "✅ Always (this session)": SUCCESS,
    }
    await discord_sim.press_button(card, card.button("❌ Deny").data or "")
    await discord_sim.wait_for_bot_message(dm, lambda m: m.text == "left alone")
    await run.idle(dm_key(dm))
