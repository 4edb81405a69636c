"""The web chat hands each button's role to the page, which colours it by role."""

from __future__ import annotations

from tests.web.conftest import WebGatewayFactory
from tests.web.harness import new_id


async def test_an_approval_card_carries_its_buttons_roles(web_gateway: WebGatewayFactory) -> None:
    gateway = await web_gateway()
    conversation = new_id()
    stream = await gateway.events(conversation)
    await gateway.send(conversation, "run: rm -rf ./old-build")
    card = await stream.message_containing("Approval needed")
    roles = {b["label"]: b["role"] for row in card.data["buttons"] for b in row}
    assert roles == {
        "✅ Approve": "approve",
        "❌ Deny": "deny",
        "✅ Always (this session)": "always",
    }
    deny = next(b for row in card.data["buttons"] for b in row if b["role"] == "deny")
    body = {"conversation": conversation, "message": card.data["id"], "data": deny["data"]}
    async with await gateway.post("/api/press", body) as pressed:
        assert pressed.status == 202
    await stream.message_containing("Denied")
    await gateway.idle(conversation)
    await stream.close()
