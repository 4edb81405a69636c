"""Slack's HTTP endpoint answers a malformed or forged request with a short 4xx (never a
5xx, which Slack retries), logs one WARNING without the payload's text, and keeps
answering: the real slack-bolt behind our edge checks (``adapters.slack.receivers``), a
signed request posted by hand, then a real DM through the simulator."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlencode

import aiohttp
import aiosqlite
import pytest

from core.store.sqlite import SqliteStore, open_store
from tests.platform_sim.slack_sim import ALICE, SlackSim
from tests.slack.conftest import GatewayFactory
from tests.slack.harness import SlackGateway
from tests.support.model_replies import reply_text
from tests.support.model_server import ScriptedModelServer

USER_TEXT = "alice-private-words"
"""Put in every bad payload: it must never reach a log line."""
JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
EVENT = {"type": "message", "user": ALICE.id, "text": USER_TEXT, "ts": "1.000001"}


def _form(payload: str) -> str:
    return urlencode({"payload": payload})


SIGNED_GARBAGE = {
    "not JSON": ('{"text": "' + USER_TEXT, JSON),
    "a JSON list": (json.dumps([USER_TEXT]), JSON),
    "a JSON string": (json.dumps(USER_TEXT), JSON),
    "an event that is a string": (json.dumps({"type": "event_callback", "event": USER_TEXT}), JSON),
    "deeply nested JSON": ("[" * 100_000 + "]" * 100_000, JSON),
    "a form whose payload is not JSON": (_form("{" + USER_TEXT), FORM),
    "a form whose payload is a JSON list": (_form(json.dumps([USER_TEXT])), FORM),
    "an event without a type": (json.dumps({"type": "event_callback", "event": {}}), JSON),
    "an event whose type is a list": (
        json.dumps({"type": "event_callback", "event": {**EVENT, "type": ["message"]}}),
        JSON,
    ),
}


async def _post(run: SlackGateway, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    """POST by hand; every refusal also tells Slack not to retry it."""
    assert run.adapter.http_url is not None
    async with (
        aiohttp.ClientSession(trust_env=False) as http,
        http.post(run.adapter.http_url, data=io.BytesIO(body), headers=headers) as response,
    ):
        if 400 <= response.status < 500:
            assert response.headers.get("X-Slack-No-Retry") == "1"
        return response.status, await response.text()


async def _signed(run: SlackGateway, sim: SlackSim, body: str, ctype: str) -> tuple[int, str]:
    headers = sim.sign(body) | {"Content-Type": ctype}
    return await _post(run, body.encode(), headers)


def _refusals(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "adapters.slack.receivers"]


def _one_clean_warning(caplog: pytest.LogCaptureFixture) -> None:
    refusals = _refusals(caplog)
    assert [r.levelno for r in refusals] == [logging.WARNING]
    assert USER_TEXT not in refusals[0].getMessage()
    caplog.clear()


async def _still_answers(sim: SlackSim, run: SlackGateway) -> None:
    dm = sim.dm_channel(ALICE)
    await sim.user_says(dm, "are you still there?")
    reply = await sim.wait_for_bot_message(dm)
    assert reply.text == "still here"
    await run.idle(f"slack:dm:{dm}")


@pytest.mark.parametrize("case", SIGNED_GARBAGE, ids=list(SIGNED_GARBAGE))
async def test_a_signed_request_that_is_not_a_slack_payload_gets_400(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    caplog: pytest.LogCaptureFixture, case: str,
) -> None:  # fmt: skip
    model_server.script(reply_text("still here"))
    run = await slack_gateway("http")
    caplog.set_level(logging.INFO)
    body, ctype = SIGNED_GARBAGE[case]
    status, text = await _signed(run, slack_sim, body, ctype)
    assert status == 400, text
    assert len(text) < 200 and USER_TEXT not in text
    _one_clean_warning(caplog)
    await _still_answers(slack_sim, run)
    assert len(model_server.requests) == 1


async def test_a_signed_body_that_is_not_utf8_gets_400(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, caplog: pytest.LogCaptureFixture
) -> None:
    run = await slack_gateway("http")
    body = b'{"text": "\xff\xfe"}'
    ts = str(int(time.time()))
    headers = _signature(slack_sim, body, ts) | {"Content-Type": JSON}
    status, text = await _post(run, body, headers)
    assert (status, json.loads(text)) == (400, {"error": "body is not UTF-8"})
    _one_clean_warning(caplog)


@pytest.mark.parametrize("timestamp", ["soon", "", "1e9", "-12", "١٢٣"])
async def test_a_non_numeric_timestamp_gets_401(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    caplog: pytest.LogCaptureFixture, timestamp: str,
) -> None:  # fmt: skip
    model_server.script(reply_text("still here"))
    run = await slack_gateway("http")
    body = json.dumps({"type": "event_callback", "event": EVENT})
    headers = {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": "v0=" + "0" * 64}
    status, text = await _post(run, body.encode(), headers | {"Content-Type": JSON})
    assert status == 401, text
    assert json.loads(text) == {"error": "missing or non-numeric X-Slack-Request-Timestamp"}
    _one_clean_warning(caplog)
    await _still_answers(slack_sim, run)


async def test_a_correctly_signed_but_stale_request_gets_401(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, caplog: pytest.LogCaptureFixture
) -> None:
    run = await slack_gateway("http")
    body = json.dumps({"type": "event_callback", "event": EVENT})
    headers = slack_sim.sign(body, timestamp=int(time.time()) - 600) | {"Content-Type": JSON}
    status, text = await _post(run, body.encode(), headers)
    assert (status, json.loads(text)) == (401, {"error": "stale X-Slack-Request-Timestamp"})
    _one_clean_warning(caplog)


@pytest.mark.parametrize("signature", ["v0=" + "0" * 64, "v0=ü" + "0" * 63, "", "sha1=abc"])
async def test_garbage_with_a_wrong_signature_gets_401_before_it_is_read(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, caplog: pytest.LogCaptureFixture,
    signature: str,
) -> None:  # fmt: skip
    run = await slack_gateway("http")
    headers = {"X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": signature}
    status, text = await _post(run, b"[" * 1000, headers | {"Content-Type": JSON})
    assert (status, json.loads(text)) == (401, {"error": "invalid X-Slack-Signature"})
    _one_clean_warning(caplog)


async def test_a_huge_body_gets_413(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    model_server.script(reply_text("still here"))
    run = await slack_gateway("http")
    body = json.dumps({"type": "event_callback", "event": {**EVENT, "text": "x" * 2_000_000}})
    status, text = await _signed(run, slack_sim, body, JSON)
    assert status == 413, text
    assert json.loads(text) == {"error": "body larger than 1048576 bytes"}
    _one_clean_warning(caplog)
    await _still_answers(slack_sim, run)


def _signature(sim: SlackSim, body: bytes, ts: str) -> dict[str, str]:
    base = b"v0:" + ts.encode() + b":" + body
    digest = hmac.new(sim.signing_secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}


BOLT_CANNOT_READ = {
    "actions that are a string": _form(json.dumps({"type": "block_actions", "actions": USER_TEXT})),
    "actions of strings": _form(json.dumps({"type": "block_actions", "actions": [USER_TEXT]})),
    "no actions": _form(json.dumps({"type": "block_actions", "actions": []})),
    "a view that is a number": _form(json.dumps({"type": "view_submission", "view": 5})),
}


@pytest.mark.parametrize("case", BOLT_CANNOT_READ, ids=list(BOLT_CANNOT_READ))
async def test_a_signed_payload_that_bolt_cannot_take_apart_gets_400_not_500(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    caplog: pytest.LogCaptureFixture, case: str,
) -> None:  # fmt: skip
    model_server.script(reply_text("still here"))
    run = await slack_gateway("http")
    status, text = await _signed(run, slack_sim, BOLT_CANNOT_READ[case], FORM)
    assert status == 400 and json.loads(text)["error"].startswith("not a Slack payload (")
    _one_clean_warning(caplog)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    await _still_answers(slack_sim, run)


async def test_a_payload_no_listener_takes_gets_404_and_is_logged_without_its_text(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, caplog: pytest.LogCaptureFixture
) -> None:
    run = await slack_gateway("http")
    body = _form(json.dumps({"type": "shortcut", "callback_id": USER_TEXT}))
    status, _ = await _signed(run, slack_sim, body, FORM)
    assert status == 404
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == ["slack: no listener for this request; answered 404"]


@pytest.fixture
async def connection(tmp_path: Path) -> AsyncIterator[aiosqlite.Connection]:
    """The store's own connection, held by the test to make the database read-only."""
    path = tmp_path / "store.db"
    await (await open_store(path)).close()
    conn = await aiosqlite.connect(path, isolation_level=None)
    await conn.execute("PRAGMA busy_timeout = 5000")
    yield conn


@pytest.fixture
async def store(connection: aiosqlite.Connection, tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(connection, tmp_path / "store.db")
    try:
        yield opened
    finally:
        await opened.close()


async def test_a_message_the_store_cannot_take_stays_a_500_and_slacks_retry_is_answered(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer,
    connection: aiosqlite.Connection,
) -> None:  # fmt: skip
    model_server.script(reply_text("still here"))
    await slack_gateway("http")
    slack_sim.ack_timeout = 1.0  # the wait before Slack's retry (and the sim's POST timeout)
    await connection.execute("PRAGMA query_only = ON")
    dm = slack_sim.dm_channel(ALICE)
    asked = await slack_sim.user_says(dm, "are you still there?")
    await slack_sim.wait_for(lambda: any(s == 500 for _, s in slack_sim.http_deliveries))
    await connection.execute("PRAGMA query_only = OFF")
    reply = await slack_sim.wait_for_bot_message(dm, lambda m: m.text == "still here")
    assert reply.thread is None and asked.event_id is not None
    assert [s for _, s in slack_sim.http_deliveries][-1] == 200
