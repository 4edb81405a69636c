"""A Slack simulator (Web API, Socket Mode, signed HTTP delivery) for slack-bolt / slack-sdk.

Fixture: ``slack_sim``. Socket Mode::

    client = AsyncWebClient(token=sim.bot_token, base_url=sim.api_url)   # ends with "/"
    app = AsyncApp(name="sim", client=client, signing_secret=sim.signing_secret)
    handler = AsyncSocketModeHandler(app, app_token=sim.app_token)
    await handler.connect_async()  ...  await handler.close_async()

HTTP mode: serve ``app.web_app(path="/slack/events")`` on 127.0.0.1 and call
``sim.http_mode(url)``; events then arrive as signed POSTs (``X-Slack-Signature`` with
``sim.signing_secret``; set another secret on the sim to forge), interactive payloads as
``payload=<json>`` forms. ``sim.http_deliveries`` lists ``(envelope_id, status)``.

World: channel ``GENERAL`` (``C0000GEN``), DM channels from ``sim.dm_channel(user)``, users
``ALICE``/``BOB``, the bot ``U0000BOT`` (``sim.mention`` is ``<@U0000BOT>``).
User side: ``await sim.user_says(channel, text, user=ALICE, thread=ts)`` sends a ``message``
event, plus ``app_mention`` when the text mentions the bot; ``await sim.press_button(msg,
data, user=...)`` sends ``block_actions`` (``data`` matches a button's ``value`` or
``action_id``); ``await sim.use_command(channel, "/stop", "text", user=...)`` sends
``slash_commands`` (an ack with text becomes an ephemeral response, as does a
``response_url`` post unless ``response_type`` is ``in_channel``).
Streams: ``chat.startStream``/``appendStream``/``stopStream``, ``sim.streams``,
``sim.refuse_streams``, ``sim.connect_users``, ``await sim.stop_agent_session(channel,
thread_ts)`` (``agent_session_stopped``), ``sim.stream_calls(channel)``
(:mod:`tests.platform_sim.slack_streams`).
Files: ``sim.add_file(...)`` / ``sim.audio_clip(...)`` then ``await sim.user_shares(channel,
[file], "caption")``; the bot downloads ``url_private_download`` with its token (without
it: Slack's sign-in page, 200 HTML), uploads by ``files.getUploadURLExternal`` /
``files.completeUploadExternal``; ``sim.downloads``, ``sim.files.uploaded``, ``sim.scopes``
(:mod:`tests.platform_sim.slack_files`).
Conversation: ``messages``/``bot_messages``/``wait_for_bot_message`` (a thread reply has
``thread`` = parent ts), ``ephemerals``, reactions in ``raw``. Protocol: ``calls`` (method
= Web API name, ``response_url`` for response-URL posts), ``envelopes`` (``Envelope`` with
``attempts``, ``acked_at``, ``ack_payload``), ``unacked()``.

Enforced (Slack's error strings, HTTP 200 ``ok: false``): ``not_authed``/``invalid_auth``,
``channel_not_found``, ``no_text``, ``msg_too_long`` (> 40000 chars), ``invalid_blocks`` (> 50
blocks, unknown block types, text lengths, > 25 elements, duplicate ids),
``message_not_found``, ``cant_update_message``/``cant_delete_message`` (not the bot's),
``thread_not_found``, ``user_not_found``, ``already_reacted``, ``unknown_method``,
``invalid_metadata_format``/``invalid_metadata_schema``. A post's ``metadata``
(``{event_type, event_payload}``) is kept on the message and returned by
``conversations.history``/``conversations.replies`` only with ``include_all_metadata``
(events carry none); ``oldest``/``latest`` bound both reads (exclusive); rate
limits (a channel's writes, ``RateLimit``; a method's tier when ``sim.tiers[method] =
Tier(count, window)``, workspace-wide on ``sim.clock``) answer HTTP 429 ``ratelimited``
with ``Retry-After`` (whole seconds). Events not acked
within ``ack_timeout`` s are redelivered with ``retry_attempt``/``retry_reason`` (Socket Mode)
or ``X-Slack-Retry-Num`` (HTTP), up to 3 retries. The bot's own posts are echoed as events.
Faults: ``fail_next("chat.postMessage", SimError.rate_limit(1))``; ``drop_connection()``
sends Socket Mode ``disconnect`` (refresh_requested) to every connection;
``close_sockets(code)`` closes every Socket Mode websocket from the server's side, with no
``disconnect`` first (a load balancer, a deploy); ``revoke_tokens()`` ends the bot and app
tokens (every later call, ``apps.connections.open`` included, is ``invalid_auth``).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from aiohttp import ClientSession, ClientTimeout, WSMsgType, web

from tests.platform_sim.base import Json, SimButton, SimError, SimMessage, SimServer

if TYPE_CHECKING:
    from tests.platform_sim.slack_files import SimFile
    from tests.platform_sim.slack_streams import SimStream

TEAM, APP, BOT_USER, BOT_ID = "T0000FAKE", "A0000FAKE", "U0000BOT", "B0000BOT"
GENERAL = "C0000GEN"
MAX_RETRIES = 3


@dataclass(frozen=True, slots=True)
class SlackUser:
    id: str
    name: str

    def to_json(self) -> Json:
        return {"id": self.id, "team_id": TEAM, "name": self.name, "real_name": self.name.title(),
                "is_bot": self.id == BOT_USER, "deleted": False,
                "profile": {"display_name": self.name, "real_name": self.name.title()}}  # fmt: skip


ALICE = SlackUser("U0000ALICE", "alice")
BOB = SlackUser("U0000BOB", "bob")
BOT = SlackUser(BOT_USER, "test_bot")


@dataclass(slots=True)
class Envelope:
    """One delivery to the app: acked by Socket Mode ``envelope_id`` or a 2xx HTTP answer."""

    envelope_id: str
    type: str  # events_api | interactive | slash_commands
    payload: Json
    attempts: int = 0
    acked_at: float | None = None
    ack_payload: Json | None = None


@dataclass(frozen=True, slots=True)
class RateLimit:
    """Writes (chat.*) allowed per channel per ``window`` seconds; 429 beyond."""

    per_channel: int = 20
    window: float = 1.0
    retry_after: int = 1


@dataclass(frozen=True, slots=True)
class Tier:
    """A method's calls allowed per workspace per ``window`` seconds (Slack's rate tiers,
    e.g. Tier 4 ``Tier(100, 60.0)`` for ``chat.appendStream``); 429 beyond."""

    count: int
    window: float = 60.0
    retry_after: int = 1


class SlackSim(SimServer):
    platform = "slack"

    def __init__(
        self,
        *,
        signing_secret: str = "sim-signing-secret",
        ack_timeout: float = 3.0,
        rate_limit: RateLimit | None = None,
    ) -> None:
        super().__init__()
        self.bot_token, self.app_token = "xoxb-sim", "xapp-sim"
        self.signing_secret = signing_secret
        self.ack_timeout = ack_timeout
        self.rate_limit = rate_limit or RateLimit()
        self.users = {u.id: u for u in (ALICE, BOB, BOT)}
        self.channels: dict[str, Json] = {GENERAL: _channel(GENERAL, "general")}
        self.subscriptions = {"message", "app_mention", "agent_session_stopped"}
        self.envelopes: list[Envelope] = []
        self.ephemerals: list[Json] = []
        self.http_url: str | None = None
        self.http_deliveries: list[tuple[str, int]] = []
        self.sockets: list[web.WebSocketResponse] = []
        self.connections_opened = 0
        self.statuses: dict[tuple[str, str], str] = {}
        """``(channel, thread_ts)`` → the thread's assistant status ("" once cleared)."""
        from tests.platform_sim.slack_files import DEFAULT_SCOPES, SlackFiles

        self.files = SlackFiles(self)
        """Shared, downloaded and uploaded files (:mod:`tests.platform_sim.slack_files`)."""
        self.scopes: set[str] = set(DEFAULT_SCOPES)
        """The bot token's scopes (take ``files:read`` away: downloads get the sign-in page)."""
        self.uploads_disabled = False
        self.streams: dict[str, SimStream] = {}
        """Chat streams by message ts (:mod:`tests.platform_sim.slack_streams`)."""
        self.refuse_streams: dict[str, str] = {}
        """``channel`` → the error ``chat.startStream`` answers there."""
        self.connect_users: set[str] = set()
        """Slack Connect users: ``chat.stopStream`` of a stream for one is ``user_not_found``."""
        self._messages: dict[str, list[SimMessage]] = {}
        self._ts = itertools.count(1)
        self._writes: list[tuple[str, float]] = []
        self.tiers: dict[str, Tier] = {}
        """Method → its rate tier, enforced workspace-wide on ``clock`` (none by default)."""
        self._tiered: list[tuple[str, float]] = []
        self.tier_limited = 0
        """Calls answered 429 by a tier."""

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    @property
    def mention(self) -> str:
        return f"<@{BOT_USER}>"

    def new_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    def dm_channel(self, user: SlackUser) -> str:
        channel_id = "D" + user.id[1:]
        self.channels.setdefault(channel_id, _channel(channel_id, "", im=True, user=user.id))
        return channel_id

    # conversation ---------------------------------------------------------------------------
    def messages(self, channel: str) -> list[SimMessage]:
        return list(self._messages.get(channel, []))

    def bot_messages(self, channel: str) -> list[SimMessage]:
        return [m for m in self.messages(channel) if m.from_bot]

    def find_message(self, channel: str, ts: str) -> SimMessage | None:
        return next((m for m in self._messages.get(channel, []) if m.id == ts), None)

    async def wait_for_bot_message(
        self,
        channel: str,
        pred: Callable[[SimMessage], bool] | None = None,
        timeout: float = 5.0,
    ) -> SimMessage:
        def found() -> SimMessage | None:
            live = (m for m in self.bot_messages(channel) if not m.deleted)
            return next((m for m in live if pred is None or pred(m)), None)

        return await self.wait_for(found, timeout)

    def unacked(self) -> list[Envelope]:
        return [e for e in self.envelopes if e.acked_at is None]

    def store(self, channel: str, raw: Json) -> SimMessage:
        author = raw.get("user", "")
        msg = SimMessage("slack", channel, raw["ts"], author, "bot_id" in raw,
                         raw.get("text", ""), buttons_from(raw.get("blocks") or []), raw,
                         thread=raw.get("thread_ts"))  # fmt: skip
        self._messages.setdefault(channel, []).append(msg)
        return msg

    # acting as users ------------------------------------------------------------------------
    async def user_says(
        self, channel: str, text: str, *, user: SlackUser = ALICE, thread: str | None = None
    ) -> SimMessage:
        """A user's message: a ``message`` event (and ``app_mention`` if the bot is named)."""
        if channel not in self.channels:
            raise ValueError(f"unknown channel {channel}")
        ts = self.new_ts()
        raw: Json = {"type": "message", "user": user.id, "text": text, "ts": ts, "team": TEAM,
                     "blocks": _rich_text(text)}  # fmt: skip
        if thread is not None:
            raw["thread_ts"] = thread
        msg = self.store(channel, raw)
        event = self.event_of(channel, raw)
        env = await self.deliver_event(event)
        msg.event_id = env.payload["event_id"] if env else None
        if self.mention in text:
            await self.deliver_event({**event, "type": "app_mention"})
        return msg

    async def stop_agent_session(
        self, channel: str, thread_ts: str, *, user: SlackUser = ALICE
    ) -> Json:
        """The native Stop button of the thread's agent session (``agent_session_stopped``,
        :mod:`tests.platform_sim.slack_streams`); the delivered event."""
        from tests.platform_sim.slack_streams import stop_agent_session

        return await stop_agent_session(self, channel, thread_ts, user=user)

    def stream_calls(self, channel: str | None = None) -> list[str]:
        """The stream and message-writing methods called, in order (into ``channel``)."""
        wanted = {"chat.startStream", "chat.appendStream", "chat.stopStream",
                  "chat.postMessage", "chat.update", "chat.delete"}  # fmt: skip
        return [c.method for c in self.calls if c.method in wanted
                and (channel is None or c.params.get("channel") == channel)]  # fmt: skip

    def add_file(self, name: str, content: bytes, mimetype: str, **kw: Any) -> SimFile:
        """A file a user uploaded (share it with :meth:`user_shares`)."""
        return self.files.add(name, content, mimetype, **kw)

    def audio_clip(self, content: bytes, *, mimetype: str = "audio/webm") -> SimFile:
        """A clip recorded in Slack's composer (file subtype ``slack_audio``)."""
        ext = {"audio/webm": "webm", "audio/mp4": "m4a", "video/mp4": "mp4"}.get(mimetype, "webm")
        return self.files.add(f"audio_message.{ext}", content, mimetype, subtype="slack_audio")

    async def user_shares(
        self,
        channel: str,
        files: list[SimFile],
        text: str = "",
        *,
        user: SlackUser = ALICE,
        thread: str | None = None,
    ) -> SimMessage:
        """A user's message carrying ``files`` (subtype ``file_share``, ``text`` the caption)."""
        from tests.platform_sim.slack_files import user_shares

        return await user_shares(self, channel, files, text=text, user=user, thread=thread)

    @property
    def downloads(self) -> Counter[str]:
        """Completed downloads by file id (only authorised ones are served)."""
        return self.files.downloads

    def cut_next_download(self, after: int) -> None:
        """The next served download breaks after ``after`` bytes."""
        self.files.cut_after = after

    def event_of(self, channel: str, raw: Json) -> Json:
        im = self.channels[channel].get("is_im")
        return {**raw, "channel": channel, "event_ts": raw["ts"],
                "channel_type": "im" if im else "channel"}  # fmt: skip

    async def press_button(
        self, msg: SimMessage, data: str, *, user: SlackUser = ALICE
    ) -> Envelope:
        """Click the button whose ``value`` or ``action_id`` is ``data``: ``block_actions``."""
        action = _find_action(msg.raw.get("blocks") or [], data)
        if msg.deleted or action is None:
            raise ValueError(f"message {msg.id} has no button {data!r}")
        block_id, button = action
        payload = {"type": "block_actions", "user": {"id": user.id, "username": user.name,
                   "name": user.name, "team_id": TEAM}, "api_app_id": APP, "token": "verif",
                   "team": {"id": TEAM, "domain": "sim"}, "trigger_id": f"trig{self.next_id()}",
                   "container": {"type": "message", "message_ts": msg.id, "channel_id": msg.chat,
                                 "is_ephemeral": False},
                   "channel": {"id": msg.chat, "name": self.channels[msg.chat]["name"]},
                   "message": msg.raw, "state": {"values": {}},
                   "response_url": f"{self.url}/response/{msg.chat}/{msg.id}/{user.id}",
                   "actions": [{"type": "button", "action_id": button.get("action_id"),
                                "block_id": block_id, "text": button.get("text"),
                                "value": button.get("value"),
                                "action_ts": self.new_ts()}]}  # fmt: skip
        return await self.deliver("interactive", payload)

    async def use_command(
        self, channel: str, command: str, text: str = "", *, user: SlackUser = ALICE
    ) -> Envelope:
        """Run the slash command ``command`` (e.g. ``"/stop"``) with ``text``."""
        name = self.channels[channel]["name"]
        key = f"cmd{self.next_id()}"
        payload = {"token": "verif", "team_id": TEAM, "team_domain": "sim", "channel_id": channel,
                   "channel_name": name, "user_id": user.id, "user_name": user.name,
                   "command": command, "text": text, "api_app_id": APP,
                   "is_enterprise_install": "false", "trigger_id": f"trig{self.next_id()}",
                   "response_url": f"{self.url}/response/{channel}/{key}/{user.id}"}  # fmt: skip
        return await self.deliver("slash_commands", payload)

    async def _acked(self, env: Envelope, payload: Json | None) -> None:
        """Record an ack; a slash command's ack payload is shown as its response."""
        if env.acked_at is not None:
            return
        env.acked_at, env.ack_payload = time.monotonic(), payload
        if env.type == "slash_commands" and payload:
            from tests.platform_sim.slack_api import respond

            p = env.payload
            await respond(self, p["channel_id"], p["user_id"], payload)

    # delivery -------------------------------------------------------------------------------
    async def deliver_event(self, event: Json) -> Envelope | None:
        if event["type"] not in self.subscriptions:
            return None
        payload = {"token": "verif", "team_id": TEAM, "api_app_id": APP, "event": event,
                   "type": "event_callback", "event_id": f"Ev{self.next_id():08d}",
                   "event_time": int(time.time()), "is_ext_shared_channel": False,
                   "authorizations": [{"enterprise_id": None, "team_id": TEAM,
                                       "user_id": BOT_USER, "is_bot": True,
                                       "is_enterprise_install": False}]}  # fmt: skip
        return await self.deliver("events_api", payload)

    async def deliver(self, kind: str, payload: Json) -> Envelope:
        env = Envelope(f"env-{self.next_id()}", kind, payload)
        self.envelopes.append(env)
        self.spawn(self._deliver(env), f"deliver {env.envelope_id}")
        await self.changed()
        return env

    async def _deliver(self, env: Envelope) -> None:
        retries = MAX_RETRIES if env.type == "events_api" else 0
        for attempt in range(retries + 1):
            env.attempts = attempt + 1
            if self.http_url is not None:
                await self._post(env, attempt)
            else:
                await self._send_socket(env, attempt)
            try:
                await self.wait_for(lambda: env.acked_at is not None, timeout=self.ack_timeout)
                return
            except TimeoutError:
                continue

    async def _send_socket(self, env: Envelope, attempt: int) -> None:
        frame = {"envelope_id": env.envelope_id, "type": env.type, "payload": env.payload,
                 "accepts_response_payload": env.type != "events_api",
                 "retry_attempt": attempt,
                 "retry_reason": "timeout" if attempt else ""}  # fmt: skip
        live = await self.wait_for(lambda: [s for s in self.sockets if not s.closed], 3600)
        await live[-1].send_str(json.dumps(frame))

    async def _post(self, env: Envelope, attempt: int) -> None:
        assert self.http_url is not None
        form = "application/x-www-form-urlencoded"
        if env.type == "events_api":
            body, ctype = json.dumps(env.payload), "application/json"
        elif env.type == "slash_commands":
            body, ctype = urlencode(env.payload), form
        else:
            body, ctype = urlencode({"payload": json.dumps(env.payload)}), form
        headers = self.sign(body) | {"Content-Type": ctype}
        if attempt:
            headers |= {"X-Slack-Retry-Num": str(attempt), "X-Slack-Retry-Reason": "http_error"}
        self.spawn(self._post_once(env, body, headers), f"post {env.envelope_id}")

    async def _post_once(self, env: Envelope, body: str, headers: dict[str, str]) -> None:
        assert self.http_url is not None
        timeout = ClientTimeout(total=self.ack_timeout)
        try:
            async with (
                ClientSession(timeout=timeout) as http,
                http.post(self.http_url, data=body.encode(), headers=headers) as resp,
            ):
                status, text = resp.status, await resp.text()
        except (OSError, TimeoutError):
            status, text = 0, ""
        self.http_deliveries.append((env.envelope_id, status))
        if status == 200:  # a plain-text body is the response's text, as on Slack
            payload = json.loads(text) if text.startswith("{") else {"text": text}
            await self._acked(env, payload if text else None)
        await self.changed()

    def sign(self, body: str, timestamp: int | None = None) -> dict[str, str]:
        """Slack request-signing headers for ``body`` with ``signing_secret``."""
        ts = str(int(time.time()) if timestamp is None else timestamp)
        base = f"v0:{ts}:{body}".encode()
        digest = hmac.new(self.signing_secret.encode(), base, hashlib.sha256).hexdigest()
        return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}

    def http_mode(self, url: str | None) -> None:
        """Deliver to the app's HTTP endpoint ``url`` (``None``: back to Socket Mode)."""
        self.http_url = url

    # socket mode ----------------------------------------------------------------------------
    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.sockets.append(ws)
        await ws.send_str(json.dumps({"type": "hello", "num_connections": len(self.sockets),
                                      "debug_info": {"host": "sim-slack", "build_number": 1,
                                                     "approximate_connection_time": 18060},
                                      "connection_info": {"app_id": APP}}))  # fmt: skip
        await self.changed()
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    await self._ack(json.loads(msg.data))
        finally:
            self.sockets.remove(ws)
            await self.changed()
        return ws

    async def _ack(self, frame: Json) -> None:
        env = next((e for e in self.envelopes if e.envelope_id == frame.get("envelope_id")), None)
        if env is not None:
            await self._acked(env, frame.get("payload"))
        self.record("ack", frame, "WS").status = 200
        await self.changed()

    async def drop_connection(self) -> int:
        """Ask every Socket Mode connection to reconnect (``disconnect``/refresh_requested)."""
        live = [s for s in self.sockets if not s.closed]
        frame = {"type": "disconnect", "reason": "refresh_requested",
                 "debug_info": {"host": "sim-slack"}}  # fmt: skip
        for ws in live:
            await ws.send_str(json.dumps(frame))
        return len(live)

    async def send_raw_frame(self, text: str) -> int:
        """Send ``text`` as is over every live Socket Mode websocket; how many."""
        live = [s for s in self.sockets if not s.closed]
        for ws in live:
            await ws.send_str(text)
        return len(live)

    async def close_sockets(self, code: int = 1011) -> int:
        """Close every live Socket Mode websocket (server side, ``code``); how many."""
        live = [s for s in self.sockets if not s.closed]
        for ws in live:
            await ws.close(code=code, message=b"server going away")
        return len(live)

    async def revoke_tokens(self) -> None:
        """The app was uninstalled / its tokens revoked: both answer ``invalid_auth`` now."""
        self.bot_token = f"xoxb-revoked-{self.next_id()}"
        self.app_token = f"xapp-revoked-{self.next_id()}"
        await self.changed()

    def check_rate(self, channel: str) -> None:
        """The channel's write window, on ``clock`` (a test's pacing clock when given)."""
        now, limit = self.clock(), self.rate_limit
        self._writes = [(c, t) for c, t in self._writes if now - t < limit.window]
        if len([c for c, _ in self._writes if c == channel]) >= limit.per_channel:
            raise SlackApiFailure("ratelimited", status=429, retry_after=limit.retry_after)
        self._writes.append((channel, now))

    def check_tier(self, method: str) -> None:
        """The method's tier (``tiers``), counted across the workspace on ``clock``."""
        tier = self.tiers.get(method)
        if tier is None:
            return
        now = self.clock()
        self._tiered = [(m, t) for m, t in self._tiered if now - t < tier.window or m != method]
        if sum(1 for m, _ in self._tiered if m == method) >= tier.count:
            self.tier_limited += 1
            raise SlackApiFailure("ratelimited", status=429, retry_after=tier.retry_after)
        self._tiered.append((method, now))

    def error_for(self, error: SimError) -> SlackApiFailure:
        if error.kind == "rate_limit":
            return SlackApiFailure("ratelimited", 429, max(1, round(error.retry_after)))
        defaults = {"forbidden": "not_in_channel", "not_found": "channel_not_found",
                    "server_error": "internal_error"}  # fmt: skip
        default = defaults.get(error.kind, "invalid_arguments")
        status = error.status if error.kind == "server_error" else 200
        return SlackApiFailure(str(error.code or default), status)

    # HTTP -----------------------------------------------------------------------------------
    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/response/{channel}/{ts}/{user}", self._response_url)
        app.router.add_get("/link", self._socket)
        from tests.platform_sim.slack_files import add_routes

        add_routes(self, app)

    async def _api(self, request: web.Request) -> web.Response:
        from tests.platform_sim.slack_api import handle_api  # the API module imports this one

        return await handle_api(self, request)

    async def _response_url(self, request: web.Request) -> web.Response:
        from tests.platform_sim.slack_api import handle_response_url

        return await handle_response_url(self, request)

    async def stop(self) -> None:
        self.closing = True
        for ws in list(self.sockets):
            await ws.close()
        await super().stop()


class SlackApiFailure(Exception):
    """``{"ok": false, "error": error}``; HTTP 429 with Retry-After when rate limited."""

    def __init__(self, error: str, status: int = 200, retry_after: int | None = None,
                 **extra: Any) -> None:  # fmt: skip
        super().__init__(error)
        self.error, self.status, self.retry_after, self.extra = error, status, retry_after, extra


def _channel(channel_id: str, name: str, *, im: bool = False, user: str | None = None) -> Json:
    data: Json = {"id": channel_id, "name": name, "is_channel": not im, "is_im": im,
                  "is_private": im, "is_member": True, "is_archived": False,
                  "created": 1700000000, "context_team_id": TEAM}  # fmt: skip
    return data | {"user": user} if user else data


def _rich_text(text: str) -> list[Json]:
    return [{"type": "rich_text", "block_id": "rt", "elements": [
        {"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}]}]  # fmt: skip


def buttons_from(blocks: list[Json]) -> list[SimButton]:
    found = []
    for block in blocks:
        for el in block.get("elements", []) if block.get("type") == "actions" else []:
            if el.get("type") == "button":
                label = str((el.get("text") or {}).get("text", ""))
                found.append(
                    SimButton(label, el.get("value") or el.get("action_id"), el.get("url"))
                )
    return found


def _find_action(blocks: list[Json], data: str) -> tuple[str, Json] | None:
    for block in blocks:
        for el in block.get("elements", []) if block.get("type") == "actions" else []:
            if el.get("type") == "button" and data in (el.get("value"), el.get("action_id")):
                return str(block.get("block_id", "")), el
    return None
