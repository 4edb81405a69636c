"""A Discord simulator (REST v10 + gateway websocket) on 127.0.0.1 for the real discord.py.

Fixture: ``discord_sim`` points ``discord.http.Route.BASE`` at ``sim.api_base`` and
``DiscordWebSocket.DEFAULT_GATEWAY`` at ``sim.gateway_url`` (restored afterwards). Start a
client with::

    client = discord.Client(intents=intents, guild_ready_timeout=0.05)
    await client.login(sim.token)
    task = asyncio.create_task(client.connect(reconnect=False))
    await client.wait_until_ready()  ...  await client.close(); await task

World: guild ``GUILD`` with text channel ``GENERAL``; users ``ALICE``/``BOB``;
``sim.dm_channel(user)``; ``await sim.add_thread(parent, name)`` (THREAD_CREATE).
User side: ``await sim.user_says(channel, text, user=ALICE, thread=None)`` (``<@id>`` in the
text becomes a mention; ``sim.mention`` is the bot's), ``await sim.press_button(msg,
custom_id, user=...)`` -> :class:`Interaction` (``responses`` list its callbacks),
``await sim.use_command(channel, name, {"opt": "v"})`` runs a slash command registered by
``tree.sync()``. A ``discord.Client`` waits 5 s before identifying again after an
INVALID_SESSION (``before_identify_hook``); override that hook in tests.
Files (:mod:`.discord_files`): ``user_says(..., files=[Upload(name, data)])`` attaches
files, ``user_voice_message(channel, audio)`` sends a voice message (flag 1<<13,
``duration_secs``, ``waveform``); ``cdn`` serves every attachment at its signed URL (404
"This content is no longer available." once expired: ``cdn.expire_links()``) and counts
``cdn.downloads``; a multipart message upload keeps its files (``file_of(attachment)``),
413 / 40005 over ``cdn.upload_limit``.
Conversation: ``messages(channel)``, ``bot_messages(channel)``, ``wait_for_bot_message``,
``typing(channel)``; protocol: ``calls`` (method = route name, e.g. ``create_message``),
``gateway.identify``, ``gateway.resumes``, ``commands``.

Enforced (real codes/messages): content <= 2000 (50035 BASE_TYPE_MAX_LENGTH), empty message
(50006), <= 5 action rows of <= 5 buttons, custom_id <= 100, editing another user's message
(50005), unknown message/channel (10008/10003), one callback per interaction (40060) within
``interaction_window`` s (10062), webhook token of an unknown interaction (10015) or one
older than ``token_lifetime`` s (401, 50027 Invalid Webhook Token), the
MESSAGE_CONTENT intent (content blanked in guild messages that don't mention the bot),
GUILD_MESSAGES / DIRECT_MESSAGES intents, privileged intents (close 4014), bad token (401 /
close 4004), per-route buckets (on ``sim.clock``) with ``X-RateLimit-*`` headers and 429 + ``Via`` +
``retry_after``, the channel edit budget (``edit_limit``: 5 edits of messages in one
channel in any 5 s, measured on ``sim.clock`` — the harness gives it the gateway's test
clock —, over it Discord's 429 ``{"message": "You are being rate limited.",
"retry_after": s, "global": false}`` with its ``Retry-After``/``X-RateLimit-*`` headers;
``edit_limited`` counts them), a message ``nonce`` of at most 25 characters and
``enforce_nonce`` (the same nonce from the same author in the same channel within
``nonce_window`` s returns the message it made; none is created). The bot's own messages
and edits are echoed back over the gateway.
Two bots in one guild: ``sim.add_bot(token, user_id, username)`` → the second bot's own
``DiscordSim`` view on the same server (same ``url``, ``api_base``, ``gateway_url``): guild,
channels and messages shared; its own token (REST ``Authorization`` and IDENTIFY pick the
view), user, application and calls. Every gateway session gets every message, so each
bot's messages reach the other with ``author.bot`` set, as Discord delivers them;
``sim.bot_messages(channel, bot=view.bot)`` keeps one bot's messages.
Faults: ``fail_next("create_message", SimError.rate_limit(0.2))``; ``drop_connection(how)``
with ``reconnect`` (op 7, client resumes), ``invalid_session`` (op 9) or ``close``
(``code=4000`` unless given: ``drop_connection("close", code=4004)``);
``reset_token(new)`` (a token reset in the Developer Portal: the old token's IDENTIFY is
closed with 4004, its RESUME invalidated, its REST calls 401); the gateway's
``refuse_connects``, ``close_after_hello`` and ``send_raw`` (:mod:`.discord_gateway`).
Valid payloads to break: ``message_payload(channel, text, user)`` and
``interaction_payload(channel, user, type=...)`` (registered, so its callbacks answer).
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.platform_sim import discord_payloads as dp
from tests.platform_sim.base import Json, SimButton, SimError, SimMessage, SimServer
from tests.platform_sim.discord_files import (
    IS_VOICE_MESSAGE,
    Cdn,
    CdnFile,
    EntityTooLarge,
    Upload,
    read_multipart,
)
from tests.platform_sim.discord_gateway import DIRECT_MESSAGES, GUILD_MESSAGES, GUILDS, Gateway
from tests.platform_sim.discord_payloads import ALICE, BOB, DcChannel, DcGuild, DcUser

TOKEN = "TEST.DISCORD.TOKEN"
GUILD, GENERAL = "1000", "2000"
TOKEN_LIFETIME = 15 * 60.0
NONCE_WINDOW = 5 * 60.0
"""Discord: a nonce is "checked for uniqueness in the past few minutes"."""
Handler = Callable[["DiscordSim", web.Request, Json], Awaitable[Any]]
__all__ = ["ALICE", "BOB", "GENERAL", "GUILD", "DcApiError", "DiscordSim", "Interaction",
           "Upload"]  # fmt: skip


class DcApiError(Exception):
    def __init__(self, status: int, code: int, message: str, errors: Json | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.errors = status, code, message, errors

    def body(self) -> Json:
        body: Json = {"message": self.message, "code": self.code}
        return body | {"errors": self.errors} if self.errors else body


def invalid_form(field_name: str, code: str, message: str) -> DcApiError:
    errors = {field_name: {"_errors": [{"code": code, "message": message}]}}
    return DcApiError(400, 50035, "Invalid Form Body", errors)


@dataclass(slots=True)
class Interaction:
    """A button press or slash command: answered once (``responses``) within the window.

    ``message`` is the message whose button was pressed (``None`` for a slash command);
    ``original`` the message the response created or updated.
    """

    id: str
    token: str
    channel: str
    message: SimMessage | None
    name: str
    user: DcUser
    created: float
    responses: list[Json] = field(default_factory=list)
    original: SimMessage | None = None
    followups: list[SimMessage] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Bucket:
    """Per-route rate limit: ``limit`` requests per ``window`` seconds for each route+channel."""

    limit: int = 50
    window: float = 1.0


EDIT_LIMIT = Bucket(limit=5, window=5.0)
"""Discord's channel edit budget in practice (research/platform-features-2026.md §3.7)."""


class DiscordSim(SimServer):
    platform = "discord"

    def __init__(
        self,
        token: str = TOKEN,
        *,
        privileged_intents: int = 1 << 15 | 1 << 1,
        zlib_stream: bool = True,
        interaction_window: float = 3.0,
        bucket: Bucket | None = None,
        token_lifetime: float = TOKEN_LIFETIME,
        nonce_window: float = NONCE_WINDOW,
        edit_limit: Bucket | None = EDIT_LIMIT,
    ) -> None:
        super().__init__()
        self.token = token
        self.app_id = "900"
        self.bot = DcUser("800", "test_bot", bot=True)
        self.privileged_intents = privileged_intents
        self.zlib_stream = zlib_stream
        self.interaction_window = interaction_window
        self.token_lifetime = token_lifetime
        """Seconds an interaction's webhook token works (set 0 to expire every token)."""
        self.bucket = bucket or Bucket()
        self.edit_limit = edit_limit
        """Edits of messages in one channel per window, on ``clock`` (None: unlimited)."""
        self.edit_limited = 0
        """429s answered for the channel edit budget."""
        self._edits: dict[str, list[float]] = {}
        self.nonce_window = nonce_window
        """Seconds an ``enforce_nonce`` send returns the message its nonce made."""
        self.nonces: dict[tuple[str, str, str], tuple[SimMessage, float]] = {}
        self.gateway = Gateway(self)
        self.cdn = Cdn(lambda: self.url)
        """Attachments and their signed URLs (:mod:`.discord_files`)."""
        general = DcChannel(GENERAL, dp.GUILD_TEXT, "general", GUILD)
        self.guilds = {GUILD: DcGuild(GUILD, "Test Guild", [general], [ALICE, BOB, self.bot])}
        self.channels: dict[str, DcChannel] = {GENERAL: general}
        self.interactions: dict[str, Interaction] = {}
        self.commands: dict[str, list[Json]] = {}
        self._messages: dict[str, list[SimMessage]] = {}
        self._typing: list[tuple[str, float]] = []
        self._hits: dict[str, list[float]] = {}
        self._seq = itertools.count(1)
        self.fellows: list[DiscordSim] = [self]
        """Every bot on this simulator (:meth:`add_bot`), this one first."""

    @property
    def api_base(self) -> str:
        return f"{self.url}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    @property
    def mention(self) -> str:
        return f"<@{self.bot.id}>"

    def snowflake(self) -> str:
        ms = int(time.time() * 1000) - dp.EPOCH_MS
        return str(ms << 22 | next(self._seq) & 0x3FFFFF)

    # more bots ------------------------------------------------------------------------------
    def add_bot(self, token: str, user_id: str, username: str) -> DiscordSim:
        """A second bot in the guild: its own view, sharing the world and the gateway."""
        peer = DiscordSim(token, privileged_intents=self.privileged_intents)
        peer.bot, peer.app_id = DcUser(user_id, username, bot=True), f"9{user_id}"
        peer.url, peer.port, peer.clock, peer.errors = self.url, self.port, self.clock, self.errors
        peer.guilds, peer.channels, peer._messages = self.guilds, self.channels, self._messages
        peer.gateway, peer.cdn, peer._seq = self.gateway, self.cdn, self._seq
        peer._changed, peer.fellows = self._changed, self.fellows
        self.guilds[GUILD].members.append(peer.bot)
        self.fellows.append(peer)
        return peer

    def view_of(self, token: object) -> DiscordSim | None:
        """The bot whose token this is."""
        return next((view for view in self.fellows if view.token == token), None)

    # world ----------------------------------------------------------------------------------
    def dm_channel(self, user: DcUser) -> DcChannel:
        for c in self.channels.values():
            if c.type == dp.DM and c.recipient == user:
                return c
        channel = DcChannel(f"21{user.id}", dp.DM, recipient=user)
        self.channels[channel.id] = channel
        return channel

    async def add_thread(
        self, parent: str, name: str, *, thread_id: str | None = None, owner: str = ALICE.id
    ) -> DcChannel:
        """A new thread; started from a message, Discord gives it the message's id."""
        thread = DcChannel(thread_id or self.snowflake(), dp.PUBLIC_THREAD, name, GUILD,
                           parent_id=parent, owner_id=owner)  # fmt: skip
        self.channels[thread.id] = thread
        self.guilds[GUILD].channels.append(thread)
        data = thread.to_json() | {"newly_created": True}
        await self.gateway.dispatch("THREAD_CREATE", data, GUILDS)
        await self.changed()
        return thread

    # conversation ---------------------------------------------------------------------------
    def messages(self, channel: str | DcChannel) -> list[SimMessage]:
        key = channel if isinstance(channel, str) else channel.id
        return list(self._messages.get(key, []))

    def bot_messages(
        self, channel: str | DcChannel, *, bot: DcUser | None = None
    ) -> list[SimMessage]:
        """Messages from bots; ``bot``: from that bot only."""
        return [
            m for m in self.messages(channel) if m.from_bot and (bot is None or m.author == bot.id)
        ]

    def by_nonce(self, channel_id: str, author_id: str, nonce: str) -> SimMessage | None:
        """The message ``author_id`` made in the channel with ``nonce`` within the window."""
        found = self.nonces.get((channel_id, author_id, nonce))
        if found is None or time.monotonic() - found[1] > self.nonce_window:
            return None
        return found[0]

    def remember_nonce(self, message: SimMessage, nonce: str) -> None:
        self.nonces[(message.chat, message.author, nonce)] = (message, time.monotonic())

    def find_message(self, channel_id: str, message_id: str) -> SimMessage | None:
        return next((m for m in self._messages.get(channel_id, []) if m.id == message_id), None)

    async def wait_for_bot_message(
        self,
        channel: str | DcChannel,
        pred: Callable[[SimMessage], bool] | None = None,
        timeout: float = 5.0,
    ) -> SimMessage:
        def found() -> SimMessage | None:
            live = (m for m in self.bot_messages(channel) if not m.deleted)
            return next((m for m in live if pred is None or pred(m)), None)

        return await self.wait_for(found, timeout)

    def typing(self, channel: str | DcChannel) -> list[float]:
        key = channel if isinstance(channel, str) else channel.id
        return [at for c, at in self._typing if c == key]

    def store(self, raw: Json) -> SimMessage:
        channel = self.channels[raw["channel_id"]]
        author = raw["author"]
        thread = channel.id if channel.type == dp.PUBLIC_THREAD else None
        msg = SimMessage("discord", channel.id, raw["id"], author["id"], bool(author.get("bot")),
                         raw["content"], buttons_from(raw), raw, thread=thread)  # fmt: skip
        self._messages.setdefault(channel.id, []).append(msg)
        return msg

    async def echo(self, event: str, raw: Json, *, from_user: bool = False) -> None:
        """Dispatch a message event to the sessions whose intents cover its channel."""
        channel = self.channels[raw["channel_id"]]
        needs = DIRECT_MESSAGES if channel.type == dp.DM else GUILD_MESSAGES
        mentioned = any(m["id"] == self.bot.id for m in raw.get("mentions", []))
        exempt = channel.type == dp.DM or mentioned or not from_user
        await self.gateway.dispatch(event, raw, needs, content=exempt)
        await self.changed()

    async def echo_delete(self, event: Json) -> None:
        channel = self.channels[event["channel_id"]]
        needs = DIRECT_MESSAGES if channel.type == dp.DM else GUILD_MESSAGES
        await self.gateway.dispatch("MESSAGE_DELETE", event, needs)
        await self.changed()

    # acting as users ------------------------------------------------------------------------
    async def user_says(
        self,
        channel: str | DcChannel,
        text: str,
        *,
        user: DcUser = ALICE,
        thread: str | DcChannel | None = None,
        files: Sequence[Upload] = (),
    ) -> SimMessage:
        """A user's message in ``channel`` (or in ``thread``), dispatched as MESSAGE_CREATE;
        ``files`` are its attachments (kept on the CDN, :mod:`.discord_files`)."""
        target = thread or channel
        chan = self.channels[target if isinstance(target, str) else target.id]
        mentions = [u.to_json() for u in self.users() if f"<@{u.id}>" in text]
        attachments = [self.cdn.to_json(self.cdn.add(self.snowflake(), chan.id, f)) for f in files]
        raw = dp.message_json(self.snowflake(), chan, user, text, mentions=mentions,
                              attachments=attachments)  # fmt: skip
        return await self._user_message(raw)

    async def user_voice_message(
        self, channel: str | DcChannel, audio: bytes, *, duration_secs: float = 2.5,
        user: DcUser = ALICE,
    ) -> SimMessage:  # fmt: skip
        """A voice message as Discord's clients send one: no text, the message flag
        ``IS_VOICE_MESSAGE`` and one ``voice-message.ogg`` with its duration and waveform."""
        chan = self.channels[channel if isinstance(channel, str) else channel.id]
        upload = Upload("voice-message.ogg", audio, "audio/ogg")
        cdn = self.cdn.add(self.snowflake(), chan.id, upload, duration_secs=duration_secs,
                           waveform="AAAAAAAAAAAA")  # fmt: skip
        raw = dp.message_json(self.snowflake(), chan, user, "", attachments=[self.cdn.to_json(cdn)],
                              flags=IS_VOICE_MESSAGE)  # fmt: skip
        return await self._user_message(raw)

    def file_of(self, attachment: Json) -> CdnFile:
        """The bytes and name behind an attachment object of a message."""
        return self.cdn.of(attachment)

    async def _user_message(self, raw: Json) -> SimMessage:
        msg = self.store(raw)
        await self.echo("MESSAGE_CREATE", raw, from_user=True)
        return msg

    async def press_button(
        self, msg: SimMessage, custom_id: str, *, user: DcUser = ALICE
    ) -> Interaction:
        """Click the button ``custom_id`` on ``msg``: INTERACTION_CREATE (type 3)."""
        if msg.deleted or custom_id not in {b.data for b in msg.buttons}:
            raise ValueError(f"message {msg.id} has no button {custom_id!r}")
        inter = self._interaction(msg.chat, msg, custom_id, user)
        data = {"custom_id": custom_id, "component_type": 2}
        return await self._dispatch_interaction(inter, type=3, message=msg.raw, data=data)

    async def press_stale(
        self, msg: SimMessage, custom_id: str, raw: Json, *, user: DcUser = ALICE
    ) -> Interaction:
        """A press on an old copy ``raw`` of ``msg`` (a client that had not redrawn it)."""
        inter = self._interaction(msg.chat, msg, custom_id, user)
        data = {"custom_id": custom_id, "component_type": 2}
        return await self._dispatch_interaction(inter, type=3, message=raw, data=data)

    async def use_command(
        self,
        channel: str | DcChannel,
        name: str,
        options: dict[str, str] | None = None,
        *,
        user: DcUser = ALICE,
    ) -> Interaction:
        """Run the registered slash command ``name``: INTERACTION_CREATE (type 2)."""
        channel_id = channel if isinstance(channel, str) else channel.id
        registered = [*self.commands.get("global", []), *self.commands.get(GUILD, [])]
        command = next((c for c in registered if c["name"] == name), None)
        if command is None:
            raise ValueError(f"no application command {name!r} is registered")
        inter = self._interaction(channel_id, None, name, user)
        opts = [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()]
        data = {"id": command["id"], "name": name, "type": 1, "options": opts}
        if command.get("guild_id"):
            data["guild_id"] = command["guild_id"]
        return await self._dispatch_interaction(inter, type=2, data=data)

    def _interaction(
        self, channel: str, msg: SimMessage | None, name: str, user: DcUser
    ) -> Interaction:
        ident = self.snowflake()
        inter = Interaction(ident, f"itoken-{ident}", channel, msg, name, user, time.monotonic())
        self.interactions[ident] = inter
        return inter

    async def _dispatch_interaction(self, inter: Interaction, **fields: Any) -> Interaction:
        chan = self.channels[inter.channel]
        data = dp.interaction_json(inter.id, inter.token, self.app_id, chan, inter.user, **fields)
        await self.gateway.dispatch("INTERACTION_CREATE", data, 0)
        await self.changed()
        return inter

    def users(self) -> list[DcUser]:
        return [ALICE, BOB, *(view.bot for view in self.fellows)]

    # faults ---------------------------------------------------------------------------------
    async def drop_connection(self, how: str = "reconnect", *, code: int = 4000) -> int:
        """Gateway RECONNECT (``reconnect``), INVALID_SESSION or a ``close`` with ``code``."""
        dropped = await self.gateway.drop(how, code)
        await self.changed()
        return dropped

    def reset_token(self, token: str) -> None:
        """The bot token was reset: the old one no longer identifies, resumes or calls REST."""
        self.token = token

    def message_payload(self, channel: DcChannel, text: str, user: DcUser = ALICE) -> Json:
        """A valid MESSAGE_CREATE ``d`` (new id), neither stored nor sent."""
        return dp.message_json(self.snowflake(), channel, user, text)

    def interaction_payload(
        self, channel: DcChannel, user: DcUser = ALICE, message: SimMessage | None = None,
        **fields: Any,
    ) -> Json:  # fmt: skip
        """A valid INTERACTION_CREATE ``d`` (a press: ``type=3``, ``data`` and the pressed
        ``message``), registered so that its callbacks are answered; not sent."""
        inter = self._interaction(channel.id, message, "fuzz", user)
        if message is not None:
            fields["message"] = message.raw
        return dp.interaction_json(inter.id, inter.token, self.app_id, channel, user, **fields)

    def error_for(self, error: SimError) -> DcApiError:
        if error.kind == "rate_limit":
            return RateLimited(error.retry_after)
        defaults = {"forbidden": (50001, "Missing Access"), "not_found": (10008, "Unknown Message"),
                    "server_error": (0, "500: Internal Server Error")}  # fmt: skip
        code, message = defaults.get(error.kind, (0, "error"))
        if isinstance(error.code, int):
            code = error.code
        elif isinstance(error.code, str):
            message = error.code
        return DcApiError(error.status, code, message)

    # HTTP -----------------------------------------------------------------------------------
    def routes(self, app: web.Application) -> None:
        from tests.platform_sim.discord_rest import ROUTES  # REST handlers import this module

        app.router.add_get("/gateway", self.gateway.handle)
        self.cdn.routes(app)
        for method, path, name in ROUTES:
            app.router.add_route(method, f"/api/v10{path}", self._rest(name))
        app.router.add_route("*", "/api/v10/{tail:.*}", self._rest("unknown"))

    def _rest(self, name: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            return await self.answer_rest(name, request)

        return handle

    async def answer_rest(self, name: str, request: web.Request) -> web.Response:
        from tests.platform_sim.discord_rest import HANDLERS

        token = request.headers.get("Authorization", "").removeprefix("Bot ")
        view = self.view_of(token)
        if view is not None and view is not self:
            return await view.answer_rest(name, request)

        try:
            body = await _body(request, self.cdn.upload_limit)
        except EntityTooLarge:
            return await self._too_large(name, request)
        fields = body if isinstance(body, dict) else {"items": body}
        call = self.record(name, {**request.match_info, **fields}, request.method)
        headers = self.bucket_headers(name, request)
        try:
            response = await self._answer(name, request, body, HANDLERS, headers)
            await self.held(name, fields)
        except DcApiError as exc:
            response = _json(exc.body(), exc.status, headers | _rate_headers(exc))
        except Exception as exc:  # a simulator bug: fail the call at once, loudly
            self.internal_error(exc)
            response = _json({"message": f"simulator bug: {exc!r}", "code": 0}, 400, headers)
        call.status = response.status
        await self.changed()
        return response

    async def _answer(
        self, name: str, request: web.Request, body: Any, handlers: dict[str, Handler],
        headers: dict[str, str],
    ) -> web.Response:  # fmt: skip
        if not name.startswith(("interaction_", "webhook_")) and (
            request.headers.get("Authorization") != f"Bot {self.token}"
        ):
            raise DcApiError(401, 0, "401: Unauthorized")
        if fault := self.take_fault(name):
            raise self.error_for(fault)
        self.check_bucket(name, request)
        if name == "edit_message":
            self.check_edit_budget(request.match_info["channel_id"])
        if name not in handlers:
            raise DcApiError(404, 0, "404: Not Found")
        result = await handlers[name](self, request, body)
        if result is None:
            return web.Response(status=204, headers=headers)
        return _json(result, 200, headers)

    async def _too_large(self, name: str, request: web.Request) -> web.Response:
        self.record(name, dict(request.match_info), request.method).status = 413
        await self.changed()
        body = {"message": "Request entity too large", "code": 40005}
        return _json(body, 413, {})

    def _bucket_key(self, name: str, request: web.Request) -> str:
        major = request.match_info.get("channel_id") or request.match_info.get("token", "")
        return f"{name}:{major}"

    def check_bucket(self, name: str, request: web.Request) -> None:
        key, now = self._bucket_key(name, request), self.clock()
        hits = [t for t in self._hits.get(key, []) if now - t < self.bucket.window]
        if len(hits) >= self.bucket.limit:
            raise RateLimited(round(self.bucket.window - (now - hits[0]), 3))
        self._hits[key] = [*hits, now]

    def check_edit_budget(self, channel_id: str) -> None:
        """Count one edit in ``channel_id``; over ``edit_limit`` Discord's 429 (the edit is
        not made)."""
        if self.edit_limit is None:
            return
        limit, now = self.edit_limit, self.clock()
        hits = [t for t in self._edits.get(channel_id, []) if now - t < limit.window]
        if len(hits) >= limit.limit:
            self.edit_limited += 1
            raise RateLimited(round(limit.window - (now - hits[0]), 3), limit=limit.limit)
        self._edits[channel_id] = [*hits, now]

    def bucket_headers(self, name: str, request: web.Request) -> dict[str, str]:
        key, now = self._bucket_key(name, request), self.clock()
        used = len([t for t in self._hits.get(key, []) if now - t < self.bucket.window])
        remaining = max(self.bucket.limit - used - 1, 0)
        return {"X-RateLimit-Limit": str(self.bucket.limit),
                "X-RateLimit-Remaining": str(max(remaining, 1)),
                "X-RateLimit-Reset-After": str(self.bucket.window),
                "X-RateLimit-Reset": str(time.time() + self.bucket.window),
                "X-RateLimit-Bucket": key.split(":")[0]}  # fmt: skip

    async def stop(self) -> None:
        self.closing = True
        await self.gateway.close_all()
        await super().stop()


class RateLimited(DcApiError):
    def __init__(self, retry_after: float, *, limit: int | None = None) -> None:
        super().__init__(429, 0, "You are being rate limited.")
        self.retry_after, self.limit = retry_after, limit

    def body(self) -> Json:
        return {"message": self.message, "retry_after": self.retry_after, "global": False}


def _rate_headers(exc: DcApiError) -> dict[str, str]:
    if not isinstance(exc, RateLimited):
        return {}
    # discord.py treats a 429 without Via as a Cloudflare ban and gives up at once
    after = str(exc.retry_after)
    headers = {"Via": "1.1 google", "Retry-After": after, "X-RateLimit-Scope": "user",
               "X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": after}  # fmt: skip
    if exc.limit is not None:  # a counted budget: its size and when it resets
        headers |= {"Retry-After": str(math.ceil(exc.retry_after)),
                    "X-RateLimit-Limit": str(exc.limit),
                    "X-RateLimit-Reset": str(time.time() + exc.retry_after)}  # fmt: skip
    return headers


def _json(data: Any, status: int, headers: dict[str, str]) -> web.Response:
    # discord.py parses JSON only when Content-Type is exactly "application/json"
    return web.Response(body=json.dumps(data).encode(), status=status,
                        headers=headers | {"Content-Type": "application/json"})  # fmt: skip


async def _body(request: web.Request, upload_limit: int) -> Any:
    """The JSON body (a multipart upload's ``payload_json``; its files go to
    ``request["files"]``)."""
    if not request.can_read_body:
        return {}
    if request.content_type == "multipart/form-data":
        payload, request["files"] = await read_multipart(request, upload_limit)
        return payload
    raw = await request.read()
    return json.loads(raw) if raw else {}


def buttons_from(raw: Json) -> list[SimButton]:
    return [SimButton(label, cid, url) for label, cid, url in dp.buttons_of(raw["components"])]
