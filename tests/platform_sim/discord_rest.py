"""The REST v10 endpoints of :class:`DiscordSim`, with Discord's validation and error codes.

``ROUTES`` lists ``(HTTP method, path, name)``; the name is what ``calls`` records and what
``fail_next`` takes. Each handler returns the JSON result (``None`` means 204 No Content).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from tests.platform_sim import discord_payloads as dp
from tests.platform_sim.base import Json, SimMessage
from tests.platform_sim.discord_files import FilePart, Upload
from tests.platform_sim.discord_sim import (
    DcApiError,
    DiscordSim,
    Interaction,
    buttons_from,
    invalid_form,
)

MAX_CONTENT, MAX_ROWS, MAX_PER_ROW, MAX_CUSTOM_ID, MAX_LABEL = 2000, 5, 5, 100, 80
EPHEMERAL, LOADING = 1 << 6, 1 << 7
VALID_TYPES = "(4, 5, 6, 7, 9)"  # 6 and 7 only for component interactions
Handler = Callable[[DiscordSim, web.Request, Json], Awaitable[Any]]

ROUTES = [
    ("GET", "/users/@me", "get_me"),
    ("GET", "/oauth2/applications/@me", "application_info"),
    ("GET", "/gateway", "get_gateway"),
    ("GET", "/gateway/bot", "get_gateway_bot"),
    ("POST", "/users/@me/channels", "create_dm"),
    ("GET", "/users/{user_id}", "get_user"),
    ("GET", "/channels/{channel_id}", "get_channel"),
    ("POST", "/channels/{channel_id}/messages", "create_message"),
    ("GET", "/channels/{channel_id}/messages/{message_id}", "get_message"),
    ("PATCH", "/channels/{channel_id}/messages/{message_id}", "edit_message"),
    ("DELETE", "/channels/{channel_id}/messages/{message_id}", "delete_message"),
    ("POST", "/channels/{channel_id}/typing", "typing"),
    ("PUT", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me", "add_reaction"),
    ("POST", "/channels/{channel_id}/messages/{message_id}/threads", "create_thread"),
    ("POST", "/channels/{channel_id}/threads", "create_thread"),
    ("POST", "/interactions/{interaction_id}/{token}/callback", "interaction_callback"),
    ("GET", "/webhooks/{app_id}/{token}/messages/@original", "webhook_get_original"),
    ("PATCH", "/webhooks/{app_id}/{token}/messages/@original", "webhook_edit_original"),
    ("DELETE", "/webhooks/{app_id}/{token}/messages/@original", "webhook_delete_original"),
    ("PATCH", "/webhooks/{app_id}/{token}/messages/{message_id}", "webhook_edit_message"),
    ("POST", "/webhooks/{app_id}/{token}", "webhook_followup"),
    ("GET", "/applications/{app_id}/commands", "get_commands"),
    ("PUT", "/applications/{app_id}/commands", "put_commands"),
    ("GET", "/applications/{app_id}/guilds/{guild_id}/commands", "get_commands"),
    ("PUT", "/applications/{app_id}/guilds/{guild_id}/commands", "put_commands"),
]


async def get_me(sim: DiscordSim, request: web.Request, body: Json) -> Json:
    return sim.bot.to_json() | {"verified": True, "mfa_enabled": False, "flags": 0}


async def application_info(sim: DiscordSim, request: web.Request, body: Json) -> Json:
    return dp.app_info(sim.app_id, sim.bot)


async def get_gateway(sim: DiscordSim, request: web.Request, body: Json) -> Json:
    return {"url": sim.gateway_url}


async def get_gateway_bot(sim: DiscordSim, request: web.Request, body: Json) -> Json:
    limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
    return {"url": sim.gateway_url, "shards": 1, "session_start_limit": limit}


async def get_user(sim: DiscordSim, request: web.Request, body: Json) -> Json:
    user = next((u for u in sim.users() if u.id == request.match_info["user_id"]), None)
    if user is None:
        raise DcApiError(404, 10013, "Unknown User")
    return user.to_json()


async def create_dm(sim: DiscordSim, request: web.Request, body: Json) -> Json:
    user = next((u for u in sim.users() if u.id == str(body.get("recipient_id"))), None)
    if user is None:
        raise DcApiError(400, 50033, "Invalid Recipient(s)")
    return sim.dm_channel(user).to_json()


async def get_channel(sim: DiscordSim, request: web.Request, body: Json) -> Json:
    return _channel(sim, request).to_json()


async def create_message(sim: DiscordSim, request: web.Request, body: Json) -> Json:
    channel = _channel(sim, request)
    nonce = _nonce(body)
    if nonce is not None and body.get("enforce_nonce") is True:
        earlier = sim.by_nonce(channel.id, sim.bot.id, nonce)
        if earlier is not None:  # Discord returns the message the nonce made; none is new
            return earlier.raw
    _check_content(body, creating=True)
    extra = _content_fields(body) | ({"nonce": nonce} if nonce is not None else {})
    if files := request.get("files"):
        extra["attachments"] = _uploaded(sim, channel, body, files)
    ref = body.get("message_reference")
    if ref:  # snowflakes go back as strings, whatever the client sent
        ids = ("message_id", "channel_id", "guild_id")
        ref = {k: str(v) if k in ids and v is not None else v for k, v in ref.items()}
        target = sim.find_message(channel.id, str(ref.get("message_id")))
        if target is None and ref.get("fail_if_not_exists", True):
            raise invalid_form("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE",
                               "Unknown message")  # fmt: skip
        extra |= {"type": 19, "message_reference": ref,
                  "referenced_message": target.raw if target else None}  # fmt: skip
    raw = await _post_bot_message(sim, channel, body.get("content") or "", extra)
    if nonce is not None:
        message = sim.find_message(channel.id, raw["id"])
        assert message is not None
        sim.remember_nonce(message, nonce)
    return raw


def _uploaded(
    sim: DiscordSim, channel: dp.DcChannel, body: Json, files: list[FilePart]
) -> list[Json]:
    """The ``files[n]`` parts as the message's attachments (named as ``payload_json``'s
    ``attachments`` entry of the same id names them, else by the part's file name)."""
    names = {str(a.get("id")): a.get("filename") for a in body.get("attachments") or []}
    made = []
    for part in files:
        name = str(names.get(str(part.index)) or part.filename)
        made.append(sim.cdn.add(sim.snowflake(), channel.id, Upload(name, part.data)))
    return [sim.cdn.to_json(cdn) for cdn in made]


def _nonce(body: Json) -> str | None:
    """The send's nonce as Discord keeps it (an integer or a string of at most 25)."""
    nonce = body.get("nonce")
    if nonce is None:
        return None
    if isinstance(nonce, bool) or not isinstance(nonce, (int, str)) or len(str(nonce)) > 25:
        raise invalid_form("nonce", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
    return str(nonce)


async def get_message(sim: DiscordSim, request: web.Request, body: Json) -> Json:
    return _message(sim, request).raw


async def edit_message(sim: DiscordSim, request: web.Request, body: Json) -> Json:
    msg = _message(sim, request)
    if not msg.from_bot:
        raise DcApiError(403, 50005, "Cannot edit a message authored by another user")
    return await _edit(sim, msg, body)


async def delete_message(sim: DiscordSim, request: web.Request, body: Json) -> None:
    msg = _message(sim, request)
    await _delete(sim, msg)


async def typing(sim: DiscordSim, request: web.Request, body: Json) -> None:
    sim._typing.append((_channel(sim, request).id, time.monotonic()))


async def add_reaction(sim: DiscordSim, request: web.Request, body: Json) -> None:
    msg = _message(sim, request)
    msg.raw.setdefault("reactions", []).append({"emoji": {"name": request.match_info["emoji"]},
                                               "count": 1, "me": True})  # fmt: skip


async def create_thread(sim: DiscordSim, request: web.Request, body: Json) -> Json:
    parent = _channel(sim, request)
    thread_id = None
    if "message_id" in request.match_info:
        thread_id = _message(sim, request).id
        if thread_id in sim.channels:
            raise DcApiError(400, 160004, "A thread has already been created for this message")
    name = str(body.get("name", "thread"))
    thread = await sim.add_thread(parent.id, name, thread_id=thread_id, owner=sim.bot.id)
    return thread.to_json()


async def interaction_callback(sim: DiscordSim, request: web.Request, body: Json) -> Any:
    inter = sim.interactions.get(request.match_info["interaction_id"])
    late = inter is not None and time.monotonic() - inter.created > sim.interaction_window
    if inter is None or inter.token != request.match_info["token"] or late:
        raise DcApiError(404, 10062, "Unknown interaction")
    if inter.responses:
        raise DcApiError(400, 40060, "Interaction has already been acknowledged.")
    kind, data = int(body.get("type", 0)), body.get("data") or {}
    raw = await _respond(sim, inter, kind, data)
    inter.responses.append(body)
    if request.query.get("with_response") not in ("1", "true", "True"):
        return None
    return _callback_response(inter, kind, raw)


async def _respond(sim: DiscordSim, inter: Interaction, kind: int, data: Json) -> Json | None:
    channel = sim.channels[inter.channel]
    if kind in (4, 5):
        _check_content(data, creating=kind == 4)
        flags = int(data.get("flags", 0)) | (LOADING if kind == 5 else 0)
        kind_of = 3 if inter.message is not None else 2
        origin = {"id": inter.id, "type": kind_of, "name": inter.name,
                  "user": inter.user.to_json()}  # fmt: skip
        extra = _content_fields(data) | {"flags": flags, "type": 20 if kind_of == 2 else 0,
                                         "interaction": origin}  # fmt: skip
        raw = await _post_bot_message(sim, channel, data.get("content") or "", extra)
        inter.original = sim.find_message(channel.id, raw["id"])
        return raw
    if kind in (6, 7) and inter.message is not None:
        inter.original = inter.message
        return await _edit(sim, inter.message, data) if kind == 7 else inter.message.raw
    if kind == 9:
        return None
    raise invalid_form("type", "BASE_TYPE_CHOICES", f"Value must be one of {VALID_TYPES}: {kind}")


def _callback_response(inter: Interaction, kind: int, raw: Json | None) -> Json:
    loading = kind == 5
    ephemeral = bool(raw and raw.get("flags", 0) & EPHEMERAL)
    info = {"id": inter.id, "type": 3, "response_message_id": raw["id"] if raw else None,
            "response_message_loading": loading,
            "response_message_ephemeral": ephemeral}  # fmt: skip
    resource: Json = {"type": kind}
    if raw is not None:
        resource["message"] = raw
    return {"interaction": info, "resource": resource}


async def webhook_get_original(sim: DiscordSim, request: web.Request, body: Json) -> Json:
    return _original(sim, request).raw


async def webhook_edit_original(sim: DiscordSim, request: web.Request, body: Json) -> Json:
    msg = _original(sim, request)
    msg.raw["flags"] = int(msg.raw.get("flags", 0)) & ~LOADING
    return await _edit(sim, msg, body)


async def webhook_delete_original(sim: DiscordSim, request: web.Request, body: Json) -> None:
    await _delete(sim, _original(sim, request))


async def webhook_edit_message(sim: DiscordSim, request: web.Request, body: Json) -> Json:
    inter = _by_token(sim, request)
    msg = next((m for m in inter.followups if m.id == request.match_info["message_id"]), None)
    if msg is None:
        raise DcApiError(404, 10008, "Unknown Message")
    return await _edit(sim, msg, body)


async def webhook_followup(sim: DiscordSim, request: web.Request, body: Json) -> Json:
    inter = _by_token(sim, request)
    if not inter.responses:
        raise DcApiError(404, 10015, "Unknown Webhook")
    _check_content(body, creating=True)
    channel = sim.channels[inter.channel]
    extra = _content_fields(body) | {"flags": int(body.get("flags", 0)), "webhook_id": sim.app_id}
    raw = await _post_bot_message(sim, channel, body.get("content") or "", extra)
    followup = sim.find_message(channel.id, raw["id"])
    assert followup is not None
    inter.followups.append(followup)
    return raw


async def get_commands(sim: DiscordSim, request: web.Request, body: Json) -> list[Json]:
    return sim.commands.get(request.match_info.get("guild_id", "global"), [])


async def put_commands(sim: DiscordSim, request: web.Request, body: Any) -> list[Json]:
    commands = body if isinstance(body, list) else []
    guild = request.match_info.get("guild_id")
    scope = {"guild_id": guild} if guild else {}
    stored = [{"id": sim.snowflake(), "application_id": sim.app_id, "version": "1",
               "type": 1, "default_member_permissions": None, "dm_permission": True,
               "nsfw": False, "integration_types": [0], "contexts": None, **scope, **c}
              for c in commands]  # fmt: skip
    sim.commands[guild or "global"] = stored
    return stored


# shared -----------------------------------------------------------------------------------------
def _channel(sim: DiscordSim, request: web.Request) -> dp.DcChannel:
    channel = sim.channels.get(request.match_info["channel_id"])
    if channel is None:
        raise DcApiError(404, 10003, "Unknown Channel")
    return channel


def _message(sim: DiscordSim, request: web.Request) -> SimMessage:
    channel = _channel(sim, request)
    msg = sim.find_message(channel.id, request.match_info["message_id"])
    if msg is None or msg.deleted:
        raise DcApiError(404, 10008, "Unknown Message")
    return msg


def _by_token(sim: DiscordSim, request: web.Request) -> Interaction:
    token = request.match_info["token"]
    inter = next((i for i in sim.interactions.values() if i.token == token), None)
    if inter is None or request.match_info["app_id"] != sim.app_id:
        raise DcApiError(404, 10015, "Unknown Webhook")
    if time.monotonic() - inter.created > sim.token_lifetime:
        raise DcApiError(401, 50027, "Invalid Webhook Token")
    return inter


def _original(sim: DiscordSim, request: web.Request) -> SimMessage:
    inter = _by_token(sim, request)
    if inter.original is None or inter.original.deleted:
        raise DcApiError(404, 10008, "Unknown Message")
    return inter.original


def _check_content(body: Json, *, creating: bool) -> None:
    content = body.get("content")
    if content is not None and len(str(content)) > MAX_CONTENT:
        raise invalid_form("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
    has_any = content or body.get("embeds") or body.get("components") or body.get("attachments")
    if creating and not has_any:
        raise DcApiError(400, 50006, "Cannot send an empty message")
    _check_components(body.get("components") or [])


def _check_components(rows: list[Json]) -> None:
    if len(rows) > MAX_ROWS:
        raise invalid_form("components", "BASE_TYPE_MAX_LENGTH", "Must be 5 or fewer in length.")
    seen: set[str] = set()
    for r, row in enumerate(rows):
        items = row.get("components", [])
        if len(items) > MAX_PER_ROW:
            raise invalid_form(f"components.{r}.components", "BASE_TYPE_MAX_LENGTH",
                               "Must be 5 or fewer in length.")  # fmt: skip
        for c, item in enumerate(items):
            _check_component(item, f"components.{r}.components.{c}", seen)


def _check_component(item: Json, where: str, seen: set[str]) -> None:
    custom_id = item.get("custom_id")
    if custom_id is not None and len(str(custom_id)) > MAX_CUSTOM_ID:
        raise invalid_form(f"{where}.custom_id", "BASE_TYPE_MAX_LENGTH",
                           "Must be 100 or fewer in length.")  # fmt: skip
    if custom_id is not None and custom_id in seen:
        raise invalid_form(f"{where}.custom_id", "COMPONENT_CUSTOM_ID_DUPLICATED",
                           "Component custom id cannot be duplicated")  # fmt: skip
    if custom_id is not None:
        seen.add(str(custom_id))
    if len(str(item.get("label", ""))) > MAX_LABEL:
        raise invalid_form(f"{where}.label", "BASE_TYPE_MAX_LENGTH",
                           "Must be 80 or fewer in length.")  # fmt: skip


def _content_fields(body: Json) -> Json:
    return {k: body[k] for k in ("components", "embeds") if body.get(k) is not None}


async def _post_bot_message(
    sim: DiscordSim, channel: dp.DcChannel, content: str, extra: Json
) -> Json:
    raw = dp.message_json(sim.snowflake(), channel, sim.bot, content, **extra)
    sim.store(raw)
    await sim.echo("MESSAGE_CREATE", raw)
    return raw


async def _edit(sim: DiscordSim, msg: SimMessage, body: Json) -> Json:
    _check_content(body, creating=False)
    msg.history.append(copy.deepcopy(msg.raw))
    raw = dict(msg.raw)
    for key in ("content", "components", "embeds"):
        if key in body and body[key] is not None:
            raw[key] = body[key]
    raw["edited_timestamp"] = dp.now_iso()
    msg.raw, msg.text = raw, raw["content"]
    msg.buttons = buttons_from(raw)
    await sim.echo("MESSAGE_UPDATE", raw)
    return raw


async def _delete(sim: DiscordSim, msg: SimMessage) -> None:
    msg.deleted = True
    event = {"id": msg.id, "channel_id": msg.chat}
    if "guild_id" in msg.raw:
        event["guild_id"] = msg.raw["guild_id"]
    await sim.echo_delete(event)


HANDLERS: dict[str, Handler] = {name: globals()[name] for name in {route[2] for route in ROUTES}}
