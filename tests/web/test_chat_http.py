"""The web chat over real HTTP: a message becomes a turn, replies stream back as events."""

from __future__ import annotations

import asyncio

from tests.web.conftest import WebGatewayFactory
from tests.web.harness import new_id, shown_messages


async def test_hello_gets_the_demo_reply_over_sse(web_gateway: WebGatewayFactory) -> None:
    gateway = await web_gateway()
    conversation = new_id()
    stream = await gateway.events(conversation)
    await stream.wait_for(lambda frames: frames and frames[0].kind == "snapshot")
    await gateway.send(conversation, "hello")
    reply = await stream.message_containing("demo")
    assert reply.data["role"] == "bot"
    user = await stream.message_containing("hello")
    assert user.data["role"] == "user"
    await stream.close()


async def test_a_retried_send_with_the_same_id_runs_one_turn(
    web_gateway: WebGatewayFactory,
) -> None:
    gateway = await web_gateway()
    conversation, client_id = new_id(), new_id()
    answers = await asyncio.gather(
        *(gateway.send(conversation, "hello", client_id) for _ in range(3))
    )
    assert sorted(a["accepted"] for a in answers) == [False, False, True]
    await gateway.idle(conversation)
    await gateway.adapter.drain()
    session = await gateway.service.store.get_active_session(f"web:dm:{conversation}")
    assert session is not None
    turns = await gateway.service.store.list_turns(session.id)
    assert len(turns) == 1
    again = await gateway.send(conversation, "hello", client_id)
    assert again == {"accepted": False, "duplicate": True}


async def test_history_reloads_for_a_new_page_and_after_a_restart(
    web_gateway: WebGatewayFactory,
) -> None:
    first = await web_gateway()
    conversation = new_id()
    await first.send(conversation, "hello there")
    await first.idle(conversation)
    await first.adapter.drain()
    page = await first.events(conversation)
    snapshot = await page.wait_for(lambda frames: frames and frames[0])
    texts = [m["html"] for m in snapshot.data["messages"]]
    assert any("hello there" in t for t in texts) and any("demo" in t for t in texts)
    await page.close()
    await first.service.stop()
    second = await web_gateway()
    page = await second.events(conversation)
    snapshot = await page.wait_for(lambda frames: frames and frames[0])
    roles = [m["role"] for m in snapshot.data["messages"]]
    assert roles == ["user", "bot"]
    assert "hello there" in snapshot.data["messages"][0]["html"]
    await page.close()


async def test_reconnecting_with_last_event_id_resumes_without_gaps_or_duplicates(
    web_gateway: WebGatewayFactory,
) -> None:
    gateway = await web_gateway()
    conversation = new_id()
    first = await gateway.events(conversation)
    await gateway.send(conversation, "one")
    await first.message_containing("demo")
    await first.close()
    last_seen = [f for f in first.frames if f.id is not None][-1]
    await gateway.send(conversation, "two")
    await gateway.idle(conversation)
    await gateway.adapter.drain()
    resumed = await gateway.events(conversation, last_event_id=last_seen.id)
    await resumed.message_containing("two")
    await resumed.wait_for(
        lambda frames: any(f.kind == "busy" and not f.data["busy"] for f in frames)
    )
    numbers = [
        int(f.id.split("-")[1])
        for f in first.frames + resumed.frames
        if f.id and f.kind != "snapshot"
    ]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    assert all(f.kind != "snapshot" for f in resumed.frames)
    await resumed.close()


async def test_an_unknown_last_event_id_gets_a_snapshot(web_gateway: WebGatewayFactory) -> None:
    gateway = await web_gateway()
    conversation = new_id()
    await gateway.send(conversation, "hello")
    await gateway.idle(conversation)
    stream = await gateway.events(conversation, last_event_id="an-old-run-17")
    first = await stream.wait_for(lambda frames: frames and frames[0])
    assert first.kind == "snapshot"
    assert len(shown_messages(stream.frames)) == 2
    await stream.close()


async def test_bad_sends_get_one_readable_error_and_change_nothing(
    web_gateway: WebGatewayFactory,
) -> None:
    gateway = await web_gateway()
    cases = [
        ({"conversation": "x", "id": new_id(), "text": "hi"}, "conversation: expected"),
        ({"conversation": new_id(), "id": new_id(), "text": "  "}, "text: expected non-empty"),
        ({"conversation": new_id(), "id": "../../etc", "text": "hi"}, "id: expected"),
        ([1, 2], "body: expected a JSON object"),
    ]
    for body, error in cases:
        async with await gateway.post("/api/send", body) as response:  # type: ignore[arg-type]
            assert response.status == 400
            assert (await response.json())["error"].startswith(error)
    async with gateway.http.post(gateway.url + "/api/send", data=b"{not json") as response:
        assert response.status == 400
    assert await gateway.service.store.unfinished_inbound("web") == []
