"""A request a restart cancelled answers so, by button and by command, on its card too."""

from __future__ import annotations

from pathlib import Path

from core.store.base import ApprovalCard
from gateway.turns.approvals import RESTART_NOTICE
from tests.gateway.harness import ALICE, GatewayFactory
from tests.gateway.test_restart_cards import left_pending

CANCELLED_BY_RESTART = "Cancelled: the gateway restarted before this was answered."


async def test_a_press_on_a_card_a_restart_cancelled_says_the_restart_cancelled_it(
    tmp_path: Path, running: GatewayFactory
) -> None:
    await left_pending(tmp_path / "gateway.db", ApprovalCard("fake", "100", None, "42"))
    async with running() as gw:
        [retired] = gw.adapter.of("edit")
        assert "the gateway restarted before this was answered" in retired.text
        assert retired.text.endswith(RESTART_NOTICE) and retired.buttons == ()
        for data in ("ap:old-1:a", "ap:old-1:d", "ap:old-1:s"):
            pressed = await gw.press(ALICE, data, retired)
            assert pressed.text == CANCELLED_BY_RESTART


async def test_approve_by_id_of_a_request_a_restart_cancelled_says_so(
    tmp_path: Path, running: GatewayFactory
) -> None:
    await left_pending(tmp_path / "gateway.db", None, "old-id-1234")
    async with running() as gw:
        await gw.say(ALICE, "/approve old-id-1234")
        await gw.say(ALICE, "/deny old-id-1234")
        assert gw.adapter.texts()[-2:] == [CANCELLED_BY_RESTART, CANCELLED_BY_RESTART]
