"""The Slack Web API methods of :class:`SlackSim`, block validation and response URLs.

Every answer is HTTP 200 ``{"ok": ...}`` except rate limits (429 + ``Retry-After``) and
injected server errors, as on Slack.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from tests.platform_sim.base import Json, SimMessage
from tests.platform_sim.slack_files import METHODS as FILE_METHODS
from tests.platform_sim.slack_sim import (
    APP,
    BOT_ID,
    BOT_USER,
    TEAM,
    SlackApiFailure,
    SlackSim,
    buttons_from,
)
from tests.platform_sim.slack_streams import METHODS as STREAM_METHODS
from tests.platform_sim.slack_streams import streaming

Method = Callable[[SlackSim, Json], Awaitable[Json]]
MAX_TEXT, MAX_BLOCKS, MAX_ELEMENTS = 40000, 50, 25
BLOCK_TYPES = {"section", "actions", "context", "divider", "header", "image", "input",
               "rich_text", "markdown", "file", "video"}  # fmt: skip
APP_TOKEN_METHODS = {"apps.connections.open"}


async def handle_api(sim: SlackSim, request: web.Request) -> web.Response:
    method = request.match_info["method"]
    params = await _params(request)
    call = sim.record(method, params, request.method)
    try:
        result = await _answer(sim, method, request, params)
        await sim.held(method, params)
        response = web.json_response({"ok": True, **result})
    except SlackApiFailure as exc:
        response = _failure(exc)
    except Exception as exc:  # a simulator bug: fail the call at once, loudly
        sim.internal_error(exc)
        response = _failure(SlackApiFailure(f"simulator_bug: {exc!r}"))
    call.status = response.status
    await sim.changed()
    return response


async def _answer(sim: SlackSim, method: str, request: web.Request, params: Json) -> Json:
    _authenticate(sim, method, request, params)
    if fault := sim.take_fault(method):
        raise sim.error_for(fault)
    if method not in METHODS:
        raise SlackApiFailure("unknown_method")
    sim.check_tier(method)
    return await METHODS[method](sim, params)


def _failure(exc: SlackApiFailure) -> web.Response:
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else {}
    body = {"ok": False, "error": exc.error, **exc.extra}
    return web.json_response(body, status=exc.status, headers=headers)


def _authenticate(sim: SlackSim, method: str, request: web.Request, params: Json) -> None:
    header = request.headers.get("Authorization", "")
    token = header.removeprefix("Bearer ") if header.startswith("Bearer ") else params.get("token")
    if not token:
        raise SlackApiFailure("not_authed")
    expected = sim.app_token if method in APP_TOKEN_METHODS else sim.bot_token
    if token != expected:
        raise SlackApiFailure("invalid_auth")


async def _params(request: web.Request) -> Json:
    params: Json = dict(request.query)
    if not request.can_read_body:
        return params
    if request.content_type == "application/json":
        params.update(await request.json())
    else:
        params.update({k: v for k, v in (await request.post()).items() if isinstance(v, str)})
    for key in ("blocks", "attachments"):
        if isinstance(params.get(key), str):
            params[key] = json.loads(params[key])
    return params


# methods --------------------------------------------------------------------------------------
async def auth_test(sim: SlackSim, p: Json) -> Json:
    return {"url": "https://sim.slack.com/", "team": "Sim", "user": "test_bot", "team_id": TEAM,
            "user_id": BOT_USER, "bot_id": BOT_ID, "is_enterprise_install": False}  # fmt: skip


async def apps_connections_open(sim: SlackSim, p: Json) -> Json:
    sim.connections_opened += 1
    ticket = sim.connections_opened
    return {"url": f"ws://127.0.0.1:{sim.port}/link?ticket=t{ticket}&app_id={APP}"}


async def chat_post_message(sim: SlackSim, p: Json) -> Json:
    channel = _channel(sim, p)
    text, blocks = _content(p, required=True)
    thread = p.get("thread_ts")
    if thread is not None and sim.find_message(channel, str(thread)) is None:
        raise SlackApiFailure("thread_not_found")
    sim.check_rate(channel)
    raw: Json = {"type": "message", "user": BOT_USER, "bot_id": BOT_ID, "app_id": APP,
                 "text": text, "ts": sim.new_ts(), "team": TEAM}  # fmt: skip
    if blocks:
        raw["blocks"] = blocks
    if thread is not None:
        raw["thread_ts"] = str(thread)
        if sim.statuses.get((channel, str(thread))):  # a post clears the thread's status
            sim.statuses[(channel, str(thread))] = ""
    metadata = _metadata(p.get("metadata"))
    kept = sim.store(channel, raw | ({"metadata": metadata} if metadata else {})).raw
    await sim.deliver_event(sim.event_of(channel, raw))  # events carry no metadata
    return {"channel": channel, "ts": raw["ts"], "message": kept}


def _metadata(value: Any) -> Json | None:
    """A message's ``metadata`` as Slack keeps it: ``{event_type, event_payload}``."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise SlackApiFailure("invalid_metadata_format") from None
    if not isinstance(value, dict):
        raise SlackApiFailure("invalid_metadata_format")
    kind, payload = value.get("event_type"), value.get("event_payload")
    if not isinstance(kind, str) or not kind or not isinstance(payload, dict):
        raise SlackApiFailure("invalid_metadata_schema")
    return {"event_type": kind, "event_payload": payload}


async def chat_update(sim: SlackSim, p: Json) -> Json:
    channel = _channel(sim, p)
    msg = _message(sim, channel, p.get("ts"))
    if not msg.from_bot or streaming(sim, channel, msg.id):
        raise SlackApiFailure("cant_update_message")
    text, blocks = _content(p, required=False)
    metadata = _metadata(p.get("metadata"))
    sim.check_rate(channel)
    previous = copy.deepcopy(msg.raw)
    raw = {**msg.raw, "text": text if "text" in p else msg.raw.get("text", ""),
           "edited": {"user": BOT_USER, "ts": sim.new_ts()}}  # fmt: skip
    if "blocks" in p:
        raw["blocks"] = blocks
    if metadata:
        raw["metadata"] = metadata
    _replace(msg, raw)
    shown = {k: v for k, v in raw.items() if k != "metadata"}  # events carry no metadata
    event = {"type": "message", "subtype": "message_changed", "hidden": True, "message": shown,
             "previous_message": previous, "ts": raw["edited"]["ts"]}  # fmt: skip
    await sim.deliver_event(sim.event_of(channel, event) | {"event_ts": event["ts"]})
    return {"channel": channel, "ts": msg.id, "text": raw["text"], "message": raw}


async def chat_delete(sim: SlackSim, p: Json) -> Json:
    channel = _channel(sim, p)
    msg = _message(sim, channel, p.get("ts"))
    if not msg.from_bot:
        raise SlackApiFailure("cant_delete_message")
    msg.deleted = True
    ts = sim.new_ts()
    event = {"type": "message", "subtype": "message_deleted", "hidden": True, "ts": ts,
             "deleted_ts": msg.id, "previous_message": msg.raw}  # fmt: skip
    await sim.deliver_event(sim.event_of(channel, event))
    return {"channel": channel, "ts": msg.id}


async def chat_post_ephemeral(sim: SlackSim, p: Json) -> Json:
    channel = _channel(sim, p)
    if str(p.get("user")) not in sim.users:
        raise SlackApiFailure("user_not_found")
    text, blocks = _content(p, required=True)
    ts = sim.new_ts()
    sim.ephemerals.append({"channel": channel, "user": p["user"], "text": text,
                           "blocks": blocks, "ts": ts,
                           "thread_ts": p.get("thread_ts")})  # fmt: skip
    return {"message_ts": ts}


async def conversations_replies(sim: SlackSim, p: Json) -> Json:
    channel = _channel(sim, p)
    ts = str(p.get("ts", ""))
    parent = sim.find_message(channel, ts)
    if parent is None:
        raise SlackApiFailure("thread_not_found")
    replies = [m for m in sim.messages(channel) if m.thread == ts and m.id != ts]
    head = parent.raw | ({"thread_ts": ts, "reply_count": len(replies)} if replies else {})
    shown = [head, *(m.raw for m in _between(replies, p))]
    return {"messages": [_as_read(raw, p) for raw in shown], "has_more": False}


async def conversations_history(sim: SlackSim, p: Json) -> Json:
    """A channel's top-level messages, newest first, ``limit`` a page (``oldest`` /
    ``latest`` bound them, exclusive); thread replies are not in it."""
    channel = _channel(sim, p)
    top = [m for m in sim.messages(channel) if m.thread in (None, m.id) and not m.deleted]
    found = list(reversed(_between(top, p)))
    limit = int(p.get("limit") or 100)
    page = found[:limit]
    return {"messages": [_as_read(m.raw, p) for m in page], "has_more": len(found) > limit}


def _between(messages: list[SimMessage], p: Json) -> list[SimMessage]:
    oldest, latest = float(p.get("oldest") or 0), float(p.get("latest") or "inf")
    return [m for m in messages if oldest < float(m.id) < latest]


def _as_read(raw: Json, p: Json) -> Json:
    """A message as a history read returns it: its metadata only with include_all_metadata."""
    if _truthy(p.get("include_all_metadata")):
        return raw
    return {k: v for k, v in raw.items() if k != "metadata"}


def _truthy(value: Any) -> bool:
    return value is True or str(value).lower() in ("1", "true")


async def conversations_info(sim: SlackSim, p: Json) -> Json:
    return {"channel": sim.channels[_channel(sim, p)]}


async def users_info(sim: SlackSim, p: Json) -> Json:
    user = sim.users.get(str(p.get("user", "")))
    if user is None:
        raise SlackApiFailure("user_not_found")
    return {"user": user.to_json()}


async def reactions_add(sim: SlackSim, p: Json) -> Json:
    channel = _channel(sim, p)
    msg = _message(sim, channel, p.get("timestamp"))
    name = str(p.get("name", ""))
    reactions = msg.raw.setdefault("reactions", [])
    if any(r["name"] == name and BOT_USER in r["users"] for r in reactions):
        raise SlackApiFailure("already_reacted")
    reactions.append({"name": name, "users": [BOT_USER], "count": 1})
    return {}


async def assistant_threads_set_status(sim: SlackSim, p: Json) -> Json:
    channel = str(p.get("channel_id", ""))
    if channel not in sim.channels:
        raise SlackApiFailure("channel_not_found")
    thread = str(p.get("thread_ts", ""))
    if sim.find_message(channel, thread) is None:
        raise SlackApiFailure("invalid_thread_ts")
    sim.statuses[(channel, thread)] = str(p.get("status", ""))
    return {}


METHODS: dict[str, Method] = {
    "assistant.threads.setStatus": assistant_threads_set_status,
    "auth.test": auth_test,
    "apps.connections.open": apps_connections_open,
    "chat.postMessage": chat_post_message,
    "chat.update": chat_update,
    "chat.delete": chat_delete,
    "chat.postEphemeral": chat_post_ephemeral,
    "conversations.replies": conversations_replies,
    "conversations.history": conversations_history,
    "conversations.info": conversations_info,
    "users.info": users_info,
    "reactions.add": reactions_add,
    **FILE_METHODS,
    **STREAM_METHODS,
}


# response_url -----------------------------------------------------------------------------------
async def handle_response_url(sim: SlackSim, request: web.Request) -> web.Response:
    """A POST to a ``response_url`` (button or slash command).

    ``replace_original`` / ``delete_original`` act on the button's message; otherwise the
    response is a new message, ephemeral to the user unless ``response_type`` is in_channel.
    """
    body = await request.json()
    channel, ts, user = (request.match_info[k] for k in ("channel", "ts", "user"))
    sim.record("response_url", {"channel": channel, "ts": ts, **body}).status = 200
    msg = sim.find_message(channel, ts)
    if body.get("delete_original") or body.get("replace_original"):
        if msg is None or msg.deleted:
            return web.Response(status=404, text="message_not_found")
        if body.get("delete_original"):
            msg.deleted = True
        else:
            _replace(msg, {**msg.raw, "text": body.get("text", ""),
                           "blocks": body.get("blocks", [])})  # fmt: skip
    else:
        await respond(sim, channel, user, body)
    await sim.changed()
    return web.Response(text="ok")


async def respond(sim: SlackSim, channel: str, user: str, body: Json) -> None:
    """A response (response_url or a slash command's ack): in channel or ephemeral."""
    text, blocks = str(body.get("text", "")), body.get("blocks")
    if body.get("response_type") == "in_channel":
        params = {"channel": channel, "text": text, "blocks": blocks,
                  "thread_ts": body.get("thread_ts")}  # fmt: skip
        await chat_post_message(sim, {k: v for k, v in params.items() if v is not None})
    else:
        sim.ephemerals.append({"channel": channel, "user": user, "text": text,
                               "blocks": blocks or [], "ts": sim.new_ts()})  # fmt: skip


# validation -------------------------------------------------------------------------------------
def _channel(sim: SlackSim, p: Json) -> str:
    channel = str(p.get("channel", ""))
    if channel not in sim.channels:
        raise SlackApiFailure("channel_not_found")
    return channel


def _message(sim: SlackSim, channel: str, ts: Any) -> SimMessage:
    msg = sim.find_message(channel, str(ts or ""))
    if msg is None or msg.deleted:
        raise SlackApiFailure("message_not_found")
    return msg


def _content(p: Json, *, required: bool) -> tuple[str, list[Json]]:
    text, blocks = str(p.get("text") or ""), p.get("blocks") or []
    if required and not text and not blocks:
        raise SlackApiFailure("no_text")
    if len(text) > MAX_TEXT:
        raise SlackApiFailure("msg_too_long")
    errors = block_errors(blocks)
    if errors:
        metadata = {"messages": [f"[ERROR] {e}" for e in errors]}
        raise SlackApiFailure("invalid_blocks", errors=errors, response_metadata=metadata)
    return text, blocks


def block_errors(blocks: Any) -> list[str]:
    """Slack's ``invalid_blocks`` messages for ``blocks`` (empty when valid)."""
    if not isinstance(blocks, list):
        return ["must be an array [json-pointer:/blocks]"]
    if len(blocks) > MAX_BLOCKS:
        return [
            f"must provide an array with no more than {MAX_BLOCKS} items [json-pointer:/blocks]"
        ]
    errors: list[str] = []
    block_ids: set[str] = set()
    for i, block in enumerate(blocks):
        errors += _block_errors(block, f"/blocks/{i}", block_ids)
    return errors


def _block_errors(block: Any, where: str, block_ids: set[str]) -> list[str]:
    if not isinstance(block, dict) or block.get("type") not in BLOCK_TYPES:
        return [f"failed to match all allowed schemas [json-pointer:{where}]"]
    block_id = block.get("block_id")
    if block_id is not None and block_id in block_ids:
        return [f"duplicate block_id [json-pointer:{where}/block_id]"]
    if block_id is not None:
        block_ids.add(block_id)
    kind = block["type"]
    if kind == "section":
        return _text_errors(
            block.get("text"), 3000, f"{where}/text", required="fields" not in block
        )
    if kind == "header":
        return _text_errors(block.get("text"), 150, f"{where}/text", required=True)
    if kind == "actions":
        return _actions_errors(block.get("elements"), where)
    return []


def _text_errors(text: Any, limit: int, where: str, *, required: bool) -> list[str]:
    if text is None:
        return [f"must provide an object [json-pointer:{where}]"] if required else []
    body = text.get("text", "") if isinstance(text, dict) else None
    if not isinstance(body, str) or not body:
        return [f"must be more than 0 characters [json-pointer:{where}/text]"]
    if len(body) > limit:
        return [f"must be less than {limit + 1} characters [json-pointer:{where}/text]"]
    return []


def _actions_errors(elements: Any, where: str) -> list[str]:
    if not isinstance(elements, list) or not 1 <= len(elements) <= MAX_ELEMENTS:
        return [f"must provide an array with 1 to {MAX_ELEMENTS} items [json-pointer:{where}]"]
    errors: list[str] = []
    action_ids: set[str] = set()
    for j, el in enumerate(elements):
        at = f"{where}/elements/{j}"
        action_id = el.get("action_id")
        if action_id is not None and action_id in action_ids:
            errors.append(f"duplicate action_id [json-pointer:{at}/action_id]")
        action_ids.add(action_id)
        if el.get("type") == "button":
            errors += _text_errors(el.get("text"), 75, f"{at}/text", required=True)
            if len(str(el.get("value", ""))) > 2000:
                errors.append(f"must be less than 2001 characters [json-pointer:{at}/value]")
            if action_id is not None and len(str(action_id)) > 255:
                errors.append(f"must be less than 256 characters [json-pointer:{at}/action_id]")
    return errors


def _replace(msg: SimMessage, raw: Json) -> None:
    msg.history.append(copy.deepcopy(msg.raw))
    msg.raw, msg.text = raw, raw.get("text", "")
    msg.buttons = buttons_from(raw.get("blocks") or [])
