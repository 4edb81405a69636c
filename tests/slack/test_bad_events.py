"""A Slack message event whose session-key fields cannot be read (no ``ts``, a list for a
channel, a ``:`` in a timestamp…) is a dead letter: acknowledged, kept with why, nothing
queued, no turn — and the next valid message is answered. Real slack-bolt over Socket Mode
(and signed HTTP) against the simulator; a press of an unreadable shape is ignored."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from core.store.sqlite import SqliteStore
from tests.platform_sim.slack_sim import ALICE, GENERAL, SlackSim
from tests.slack.conftest import GatewayFactory
from tests.slack.harness import MODES, SlackGateway
from tests.support.model_replies import reply_text
from tests.support.model_server import ScriptedModelServer

USER_TEXT = "bob-private-words"

BROKEN: dict[str, dict[str, Any]] = {
    "no ts": {"ts": None},
    "ts a number": {"ts": 1700000000.5},
    "ts a list": {"ts": ["1700000000.000100"]},
    "ts not a timestamp": {"ts": "soon"},
    "ts with a colon": {"ts": "1700000000.1:2"},
    "thread_ts not a timestamp": {"thread_ts": "x"},
    "no channel": {"channel": None},
    "channel a list": {"channel": ["C0000GEN"]},
    "channel with a colon": {"channel": "C0000GEN:x"},
    "user an object": {"user": {"id": ALICE.id}},
    "user with a colon": {"user": "U1:U2"},
    "no user and no bot_id": {"user": None},
    "subtype a list": {"subtype": ["file_share"]},
    "text a list": {"text": [USER_TEXT]},
    "channel_type a number": {"channel_type": 3},
}


def _event(sim: SlackSim, **changes: Any) -> dict[str, Any]:
    dm = sim.dm_channel(ALICE)
    good = sim.event_of(dm, {"type": "message", "user": ALICE.id, "text": USER_TEXT,
                             "ts": sim.new_ts(), "team": "T0000FAKE"})  # fmt: skip
    merged = {**good, **changes}
    return {key: value for key, value in merged.items() if value is not None}


async def _answered_next(sim: SlackSim, run: SlackGateway) -> None:
    dm = sim.dm_channel(ALICE)
    await sim.user_says(dm, "hello again")
    reply = await sim.wait_for_bot_message(dm)
    assert reply.text == "answered"
    await run.idle(f"slack:dm:{dm}")


@pytest.mark.parametrize("broken", BROKEN, ids=list(BROKEN))
async def test_an_event_without_usable_key_fields_is_a_dead_letter_and_changes_nothing(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    store: SqliteStore, caplog: pytest.LogCaptureFixture, broken: str,
) -> None:  # fmt: skip
    model_server.script(reply_text("answered"))
    run = await slack_gateway("socket")
    caplog.set_level(logging.INFO)
    envelope = await slack_sim.deliver_event(_event(slack_sim, **BROKEN[broken]))
    assert envelope is not None
    await slack_sim.wait_for(lambda: envelope.acked_at is not None)
    [letter] = await store.list_dead_letters("slack")
    assert letter.item_id.startswith("unreadable-") and letter.attempts == 1
    assert letter.error.startswith("message event: ")
    assert await store.unfinished_inbound("slack") == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "quarantined" in warnings[0]
    assert USER_TEXT not in warnings[0]
    await _answered_next(slack_sim, run)
    assert len(model_server.requests) == 1
    assert model_server.requests[0].last_user_text == "hello again"


@pytest.mark.parametrize("mode", MODES)
async def test_a_message_and_its_app_mention_without_ts_are_one_dead_letter(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    store: SqliteStore, mode: str,
) -> None:  # fmt: skip
    model_server.script(reply_text("answered"))
    run = await slack_gateway(mode)
    event = _event(slack_sim, ts=None, channel=GENERAL, channel_type="channel",
                   text=f"{slack_sim.mention} {USER_TEXT}")  # fmt: skip
    first = await slack_sim.deliver_event(event)
    second = await slack_sim.deliver_event({**event, "type": "app_mention"})
    assert first is not None and second is not None
    await slack_sim.wait_for(lambda: first.acked_at is not None and second.acked_at is not None)
    assert len(await store.list_dead_letters("slack")) == 1
    assert await store.unfinished_inbound("slack") == []
    await _answered_next(slack_sim, run)
    assert len(model_server.requests) == 1


async def test_a_press_whose_place_cannot_be_read_is_acknowledged_and_ignored(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    model_server.script(reply_text("answered"))
    run = await slack_gateway("socket")
    action = {"action_id": "approve", "value": "approve", "action_ts": "1.2"}
    alice = {"id": ALICE.id}
    shapes: list[dict[str, Any]] = [
        {"channel": {"id": "C0000GEN:x"}, "container": {"message_ts": "1.2"}, "user": alice},
        {"channel": {"id": GENERAL}, "container": {"message_ts": "soon"}, "user": alice},
        {"channel": {"id": GENERAL}, "container": "1.2", "message": [], "user": alice},
        {"channel": {"id": GENERAL}, "container": {"message_ts": "1.2"}, "user": ["x"]},
        {"channel": {"id": GENERAL}, "container": {"message_ts": "1.2"}, "user": alice,
         "message": {"thread_ts": 5}},
    ]  # fmt: skip
    payloads = [{"type": "block_actions", "actions": [action], **shape} for shape in shapes]
    envelopes = [await slack_sim.deliver("interactive", payload) for payload in payloads]
    await slack_sim.wait_for(lambda: all(e.acked_at is not None for e in envelopes))
    ignored = [r for r in caplog.records if "button press ignored" in r.getMessage()]
    assert len(ignored) == len(shapes)
    await _answered_next(slack_sim, run)
    assert len(model_server.requests) == 1


GARBAGE_FRAMES: dict[str, str] = {
    "not JSON": "{not json",
    "a JSON list": "[1, 2, 3]",
    "a JSON string": '"events_api"',
    "no envelope id": '{"type": "events_api", "payload": {"event": {"type": "message"}}}',
    "payload a string": '{"envelope_id": "e-1", "type": "events_api", "payload": "x"}',
    "event a list": '{"envelope_id": "e-2", "type": "events_api", "payload": {"event": []}}',
    "unknown type": '{"envelope_id": "e-3", "type": "telepathy", "payload": {}}',
    "type a number": '{"envelope_id": "e-4", "type": 7, "payload": {}}',
    "actions a string": '{"envelope_id": "e-5", "type": "interactive", '
    '"payload": {"type": "block_actions", "actions": "x"}}',
    "a huge integer": '{"envelope_id": "e-6", "type": "events_api", "payload": '
    '{"event": {"type": "message", "ts": ' + "9" * 5000 + "}}}",
}


async def test_garbage_socket_frames_never_end_the_connection(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    store: SqliteStore,
) -> None:  # fmt: skip
    model_server.script(reply_text("answered"))
    run = await slack_gateway("socket")
    [socket] = [s for s in slack_sim.sockets if not s.closed]
    for frame in GARBAGE_FRAMES.values():
        assert await slack_sim.send_raw_frame(frame) == 1
    await _answered_next(slack_sim, run)
    assert [s for s in slack_sim.sockets if not s.closed] == [socket]  # the same socket
    assert run.adapter.health.state == "up"
    assert len(model_server.requests) == 1
    assert await store.unfinished_inbound("slack") == []
