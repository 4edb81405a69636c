"""Contract tests: the real slack-bolt / slack-sdk against the Slack simulator."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.web.async_client import AsyncWebClient

from tests.platform_sim.base import SimError
from tests.platform_sim.slack_sim import ALICE, BOB, GENERAL, RateLimit, SlackSim

APPROVE_BLOCKS = [
    {"type": "section", "text": {"type": "mrkdwn", "text": "Approve?"}},
    {"type": "actions", "block_id": "b1", "elements": [
        {"type": "button", "action_id": "approve", "value": "turn:1",
         "text": {"type": "plain_text", "text": "Approve"}}]},
]  # fmt: skip


def web_client(sim: SlackSim, token: str | None = None) -> AsyncWebClient:
    return AsyncWebClient(token=token or sim.bot_token, base_url=sim.api_url)


def approval_app(sim: SlackSim) -> AsyncApp:
    """A bolt app that answers "hi" with a button and edits the message when it is pressed."""
    app = AsyncApp(name="sim-selftest", client=web_client(sim), signing_secret="sim-signing-secret")

    @app.message("hi")
    async def hi(say: Any) -> None:
        await say(text="Approve?", blocks=APPROVE_BLOCKS)

    @app.action("approve")
    async def approve(ack: Any, body: Any, client: AsyncWebClient) -> None:
        await ack()
        who = body["user"]["name"]
        await client.chat_update(channel=body["channel"]["id"], ts=body["message"]["ts"],
                                 text=f"approved by {who}", blocks=[])  # fmt: skip

    return app


@asynccontextmanager
async def socket_mode(app: AsyncApp, sim: SlackSim) -> AsyncIterator[AsyncSocketModeHandler]:
    handler = AsyncSocketModeHandler(app, app_token=sim.app_token)
    await handler.connect_async()
    try:
        yield handler
    finally:
        await handler.close_async()


@asynccontextmanager
async def http_mode(app: AsyncApp, sim: SlackSim) -> AsyncIterator[str]:
    runner = web.AppRunner(app.web_app(path="/slack/events"), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
    sim.http_mode(url)
    try:
        yield url
    finally:
        await runner.cleanup()


@asynccontextmanager
async def serving(app: AsyncApp, sim: SlackSim, mode: str) -> AsyncIterator[None]:
    if mode == "socket":
        async with socket_mode(app, sim):
            yield
    else:
        async with http_mode(app, sim):
            yield


async def converse(sim: SlackSim) -> None:
    await sim.user_says(GENERAL, "hi there")
    prompt = await sim.wait_for_bot_message(GENERAL)
    assert prompt.button("Approve").data == "turn:1"
    await sim.press_button(prompt, "turn:1", user=BOB)
    await sim.wait_for(lambda: prompt.text == "approved by bob")
    await sim.wait_for(lambda: not sim.unacked())
    assert [v["text"] for v in prompt.history] == ["Approve?"]
    assert prompt.buttons == []


# the library contract ---------------------------------------------------------------------------
async def test_socket_mode_app_receives_message_and_click_and_updates(slack_sim: SlackSim) -> None:
    async with socket_mode(approval_app(slack_sim), slack_sim):
        await converse(slack_sim)
    kinds = [(e.type, e.attempts) for e in slack_sim.envelopes]
    assert kinds[:2] == [("events_api", 1), ("events_api", 1)]  # the user's, the bot's echo
    assert ("interactive", 1) in kinds
    assert slack_sim.calls[0].method == "apps.connections.open"


async def test_http_mode_app_receives_signed_message_and_click_and_updates(
    slack_sim: SlackSim,
) -> None:
    async with http_mode(approval_app(slack_sim), slack_sim):
        await converse(slack_sim)
    assert {status for _, status in slack_sim.http_deliveries} == {200}


async def test_forged_signature_is_rejected_and_retried(slack_sim: SlackSim) -> None:
    slack_sim.signing_secret = "not-the-apps-secret"
    slack_sim.ack_timeout = 0.05
    async with http_mode(approval_app(slack_sim), slack_sim):
        said = await slack_sim.user_says(GENERAL, "hi")
        env = slack_sim.envelopes[0]
        await slack_sim.wait_for(lambda: len(slack_sim.http_deliveries) == 4)
    assert said.event_id == env.payload["event_id"]
    assert [status for _, status in slack_sim.http_deliveries] == [401] * 4
    assert (env.attempts, env.acked_at) == (4, None)
    assert slack_sim.bot_messages(GENERAL) == []


async def test_unacked_event_is_redelivered_with_retry_attempt(slack_sim: SlackSim) -> None:
    slack_sim.ack_timeout = 0.05
    attempts: asyncio.Queue[int | None] = asyncio.Queue()

    async def never_ack(_: SocketModeClient, request: SocketModeRequest) -> None:
        attempts.put_nowait(request.retry_attempt)

    client = SocketModeClient(app_token=slack_sim.app_token, web_client=web_client(slack_sim))
    client.socket_mode_request_listeners.append(never_ack)  # type: ignore[arg-type]
    await client.connect()
    try:
        await slack_sim.user_says(GENERAL, "anyone?")
        seen = [await asyncio.wait_for(attempts.get(), 5) for _ in range(4)]
    finally:
        await client.close()
    assert seen == [0, 1, 2, 3]
    assert slack_sim.unacked() == slack_sim.envelopes


async def test_mention_also_sends_app_mention(slack_sim: SlackSim) -> None:
    app = AsyncApp(name="sim-selftest", client=web_client(slack_sim), signing_secret="x")
    mentioned: asyncio.Queue[str] = asyncio.Queue()

    @app.event("app_mention")
    async def on_mention(event: Any, say: Any) -> None:
        mentioned.put_nowait(event["text"])
        await say(text="yes?", thread_ts=event["ts"])

    @app.event("message")
    async def on_message() -> None:
        pass

    async with socket_mode(app, slack_sim):
        said = await slack_sim.user_says(GENERAL, f"{slack_sim.mention} help")
        assert await asyncio.wait_for(mentioned.get(), 5) == f"{slack_sim.mention} help"
        reply = await slack_sim.wait_for_bot_message(GENERAL)
        await slack_sim.wait_for(lambda: not slack_sim.unacked())
    assert reply.thread == said.id


async def test_respond_replaces_the_original_message(slack_sim: SlackSim) -> None:
    app = approval_app(slack_sim)

    @app.action("other")
    async def other(ack: Any, respond: Any) -> None:
        await ack()
        await respond(text="replaced", replace_original=True)

    async with socket_mode(app, slack_sim):
        blocks = [{"type": "actions", "elements": [{"type": "button", "action_id": "other",
                   "text": {"type": "plain_text", "text": "Other"}}]}]  # fmt: skip
        await web_client(slack_sim).chat_postMessage(channel=GENERAL, text="pick", blocks=blocks)
        prompt = slack_sim.bot_messages(GENERAL)[0]
        await slack_sim.press_button(prompt, "other")
        await slack_sim.wait_for(lambda: prompt.text == "replaced")
    assert slack_sim.calls_to("response_url")[0].params["replace_original"] is True


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_slash_command_ack_is_ephemeral_and_respond_in_channel_is_public(
    slack_sim: SlackSim, mode: str
) -> None:
    app = AsyncApp(
        name="sim-selftest", client=web_client(slack_sim), signing_secret=slack_sim.signing_secret
    )

    @app.command("/stop")
    async def stop(ack: Any, command: Any, respond: Any) -> None:
        await ack(f"stopping {command['text']}")
        await respond(text="stopped", response_type="in_channel")

    async with serving(app, slack_sim, mode):
        await slack_sim.use_command(GENERAL, "/stop", "turn 7", user=BOB)
        reply = await slack_sim.wait_for_bot_message(GENERAL)
        await slack_sim.wait_for(lambda: slack_sim.ephemerals)
    assert reply.text == "stopped"
    assert [(e["user"], e["text"]) for e in slack_sim.ephemerals] == [(BOB.id, "stopping turn 7")]


async def test_disconnect_makes_the_client_open_a_new_connection(slack_sim: SlackSim) -> None:
    async with socket_mode(approval_app(slack_sim), slack_sim):
        await slack_sim.wait_for(lambda: slack_sim.sockets)
        assert await slack_sim.drop_connection() == 1
        await slack_sim.wait_for(lambda: slack_sim.connections_opened == 2)
        await converse(slack_sim)


# Web API ----------------------------------------------------------------------------------------
async def test_thread_replies_are_listed_under_their_parent(slack_sim: SlackSim) -> None:
    client = web_client(slack_sim)
    parent = await slack_sim.user_says(GENERAL, "question")
    await slack_sim.user_says(GENERAL, "more detail", thread=parent.id, user=ALICE)
    await client.chat_postMessage(channel=GENERAL, text="answer", thread_ts=parent.id)
    replies = await client.conversations_replies(channel=GENERAL, ts=parent.id)
    assert [m["text"] for m in replies["messages"]] == ["question", "more detail", "answer"]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        ({"channel": GENERAL, "text": "x" * 40001}, "msg_too_long"),
        ({"channel": "C404", "text": "x"}, "channel_not_found"),
        ({"channel": GENERAL, "text": "x", "blocks": [{"type": "divider"}] * 51}, "invalid_blocks"),
        ({"channel": GENERAL, "text": "x", "blocks": [{"type": "bogus"}]}, "invalid_blocks"),
        (
            {"channel": GENERAL, "text": "x", "blocks": [{"type": "divider", "block_id": "a"}] * 2},
            "invalid_blocks",
        ),
        (
            {
                "channel": GENERAL,
                "text": "x",
                "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "y" * 3001}}],
            },
            "invalid_blocks",
        ),
        ({"channel": GENERAL, "text": "x", "thread_ts": "1.000001"}, "thread_not_found"),
    ],
)
async def test_post_message_limits(slack_sim: SlackSim, call: dict[str, Any], error: str) -> None:
    with pytest.raises(SlackApiError) as caught:
        await web_client(slack_sim).chat_postMessage(**call)
    assert caught.value.response["error"] == error


async def test_message_without_text_or_blocks_is_refused(slack_sim: SlackSim) -> None:
    # api_call, because chat_postMessage itself warns about a missing text first
    with pytest.raises(SlackApiError) as caught:
        await web_client(slack_sim).api_call("chat.postMessage", json={"channel": GENERAL})
    assert caught.value.response["error"] == "no_text"


async def test_invalid_blocks_name_the_offending_field(slack_sim: SlackSim) -> None:
    blocks = [{"type": "actions", "elements": [{"type": "button", "action_id": "a",
               "text": {"type": "plain_text", "text": "x" * 76}}]}]  # fmt: skip
    with pytest.raises(SlackApiError) as caught:
        await web_client(slack_sim).chat_postMessage(channel=GENERAL, text="x", blocks=blocks)
    assert caught.value.response["errors"] == [
        "must be less than 76 characters [json-pointer:/blocks/0/elements/0/text/text]"
    ]


async def test_update_and_delete_need_the_bots_own_live_message(slack_sim: SlackSim) -> None:
    client = web_client(slack_sim)
    said = await slack_sim.user_says(GENERAL, "mine")
    with pytest.raises(SlackApiError, match="cant_update_message"):
        await client.chat_update(channel=GENERAL, ts=said.id, text="edited")
    with pytest.raises(SlackApiError, match="cant_delete_message"):
        await client.chat_delete(channel=GENERAL, ts=said.id)
    sent = await client.chat_postMessage(channel=GENERAL, text="temp")
    await client.chat_delete(channel=GENERAL, ts=sent["ts"])
    with pytest.raises(SlackApiError, match="message_not_found"):
        await client.chat_update(channel=GENERAL, ts=sent["ts"], text="gone")


async def test_reactions_ephemerals_and_users(slack_sim: SlackSim) -> None:
    client = web_client(slack_sim)
    said = await slack_sim.user_says(GENERAL, "thanks")
    await client.reactions_add(channel=GENERAL, timestamp=said.id, name="eyes")
    with pytest.raises(SlackApiError, match="already_reacted"):
        await client.reactions_add(channel=GENERAL, timestamp=said.id, name="eyes")
    await client.chat_postEphemeral(channel=GENERAL, user=ALICE.id, text="only you")
    assert (await client.users_info(user=BOB.id))["user"]["name"] == "bob"
    with pytest.raises(SlackApiError, match="user_not_found"):
        await client.users_info(user="U404")
    assert [e["text"] for e in slack_sim.ephemerals] == ["only you"]


@pytest.mark.parametrize(("token", "error"), [("", "not_authed"), ("xoxb-wrong", "invalid_auth")])
async def test_bad_tokens_are_refused(slack_sim: SlackSim, token: str, error: str) -> None:
    client = AsyncWebClient(token=token or None, base_url=slack_sim.api_url)
    with pytest.raises(SlackApiError) as caught:
        await client.auth_test()
    assert caught.value.response["error"] == error


async def test_socket_mode_needs_the_app_token(slack_sim: SlackSim) -> None:
    with pytest.raises(SlackApiError, match="invalid_auth"):
        await web_client(slack_sim).apps_connections_open(app_token=slack_sim.bot_token)


async def test_unknown_method_is_reported(slack_sim: SlackSim) -> None:
    with pytest.raises(SlackApiError, match="unknown_method"):
        await web_client(slack_sim).api_call("chat.scheduleMessage", json={"channel": GENERAL})


# faults -----------------------------------------------------------------------------------------
async def test_rate_limit_answers_429_with_retry_after(slack_sim: SlackSim) -> None:
    slack_sim.rate_limit = RateLimit(per_channel=2, window=10.0, retry_after=3)
    client = web_client(slack_sim)
    for text in ("1", "2"):
        await client.chat_postMessage(channel=GENERAL, text=text)
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel=GENERAL, text="3")
    assert caught.value.response.status_code == 429
    assert caught.value.response["error"] == "ratelimited"
    assert caught.value.response.headers["Retry-After"] == "3"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (SimError.rate_limit(1), "ratelimited"),
        (SimError.forbidden(), "not_in_channel"),
        (SimError.not_found(), "channel_not_found"),
        (SimError.platform("is_archived"), "is_archived"),
        (SimError.server_error(), "internal_error"),
    ],
)
async def test_injected_fault_reaches_slack_sdk(
    slack_sim: SlackSim, error: SimError, expected: str
) -> None:
    slack_sim.fail_next("chat.postMessage", error)
    client = web_client(slack_sim)
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel=GENERAL, text="x")
    assert caught.value.response["error"] == expected
    assert (await client.chat_postMessage(channel=GENERAL, text="y"))["ok"]
