"""The Slack adapter: slack-bolt's ``AsyncApp`` driven by hand inside our event loop.

Lifecycle: ``start`` asks Slack who the bot is (``auth.test``), replays messages a
previous run left unfinished, then receives by Socket Mode (default; ``connect_async`` with
a watchdog, :mod:`adapters.slack.receivers`) or signed HTTP (checked at our edge before bolt:
a forged or stale request is 401, a malformed one 400 with ``X-Slack-No-Retry``, never a
5xx Slack would retry). A message event whose key fields cannot be read is a dead letter
(:func:`adapters.slack.normalize.unusable`). ``stop`` stops receiving, cancels deliveries in
flight (they replay next run) and clears any status left shown.

Health (``adapter.health``, docs/architecture.md §10): ``up`` once receiving (Socket Mode:
the socket's ``hello``; HTTP: listening); the Socket Mode receiver makes it ``retrying``
while it reconnects. A token Slack refuses for good (``invalid_auth``,
``not_allowed_token_type``, ``account_inactive``, ... from ``auth.test`` at start or
``apps.connections.open`` on any connection) makes it ``down`` with the fix, logged once;
``start`` then returns without receiving.

Every envelope is acknowledged within Slack's three seconds: the listeners only store the
message (:mod:`adapters.slack.inbox`) or hand the press or command to a background task,
and return; bolt runs them before it acknowledges (``process_before_response``), so a
message is stored before Slack hears it arrived. Turns run in the gateway's workers.

Outbound (:mod:`adapters.slack.outbound`): messages, edits, deletes, reactions, press
answers, the thread's status, chat streams and file uploads into the conversation's thread,
Slack's errors raised as the adapter error tree (:mod:`adapters.slack.errors`).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import (
    MESSAGES,
    AdapterError,
    Capabilities,
    Charges,
    ChatRef,
    EventSink,
    InboundEvent,
    RateLimit,
    SentMessage,
    StreamingMode,
)
from adapters.calls import (
    Call,
)
from adapters.health import Health, HealthCell, Sleep
from adapters.inbox import STORAGE_NOTICE
from adapters.session_keys import SessionKeyRule
from adapters.slack.blocks import BUTTON_VALUE_LIMIT
from adapters.slack.errors import platform_errors
from adapters.slack.files import UPLOAD_LIMIT, FileFetcher
from adapters.slack.inbox import SlackInbox
from adapters.slack.normalize import (
    PLATFORM,
    Normalizer,
    SlackIdentity,
    default_session_key,
    unusable,
)
from adapters.slack.outbound import SlackOutbound
from adapters.slack.receivers import HttpReceiver, Receiver, SocketReceiver, auth_refused
from adapters.slack.render import slack_renderer
from core.attachments import Attachment
from core.bounded import BoundedMap
from core.store.base import Store
from core.tasks import TaskSet

_log = logging.getLogger(__name__)

MAX_TEXT = 4000
"""Characters per message: Slack accepts 40,000 but clients truncate beyond ~4,000."""
REMEMBERED = 10_000
DEFAULT_API_URL = "https://slack.com/api/"

STREAM_LIMIT = RateLimit(100, 60.0)
"""The bot's stream calls (``chat.startStream``/``appendStream``, "live"): Slack's Tier 4,
about 100 a minute per workspace for ``chat.appendStream``, so that several answers
streaming at once slow down (coalesced to their newest text) instead of being refused."""
SLACK_CHARGES = Charges(bot=frozenset({"live"}), chat=MESSAGES, group=MESSAGES)
"""Only stream calls are paced by the gateway (the other methods have no window here: a
``ratelimited`` answer is waited out); a stream's end ("seal") is a reply's and is not
held behind them."""

SlackMode = Literal["socket", "http"]


@dataclass(frozen=True, slots=True)
class SlackSettings:
    """Everything configurable about the adapter besides the bot token and the store."""

    api_base_url: str = DEFAULT_API_URL
    mode: SlackMode = "socket"
    app_token: str = ""
    signing_secret: str = ""
    http_host: str = "127.0.0.1"
    http_port: int = 3000
    http_path: str = "/slack/events"
    slash_prefix: str = "/"
    text_prefix: str = "!"
    commands: Sequence[tuple[str, str]] = ()
    edit_interval: float = 1.2
    """``chat.update`` is Tier 3 (about 50 a minute)."""
    watchdog_seconds: float = 60.0
    """Socket Mode: a connection with no message or pong for this long is replaced."""
    ping_interval: float = 5.0
    status_text: str = "is thinking…"
    status_lease: float = 10.0
    """Seconds a status stays without a refresh (the gateway refreshes every 4 s)."""
    streaming: StreamingMode = "native"
    """``native``: chat streams in threads (:mod:`adapters.slack.streams`); ``edit``,
    ``off`` (docs/architecture.md, "Streaming")."""
    stream_interval: float = 1.0
    """Seconds between two updates of a streamed answer (``chat.appendStream`` is Tier 4,
    about 100 a minute)."""


class SlackAdapter:
    """The :class:`adapters.base.Adapter` for Slack."""

    platform = PLATFORM

    def __init__(
        self,
        bot_token: str,
        store: Store,
        settings: SlackSettings | None = None,
        key_rule: SessionKeyRule = default_session_key,
        *,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.settings = settings or SlackSettings()
        self.sleep = sleep
        """How a Socket Mode reconnection waits out its backoff (tests inject one)."""
        self.health_cell = HealthCell(PLATFORM, time.time)
        self.store, self.key_rule = store, key_rule
        self.capabilities = Capabilities(
            max_text_length=MAX_TEXT,
            length_unit="codepoints",
            supports_edit=True,
            button_payload_limit=BUTTON_VALUE_LIMIT,
            edit_interval=self.settings.edit_interval,
            markup="slack_mrkdwn",
            renderer=slack_renderer(),
            upload_limit=UPLOAD_LIMIT,
            streaming=self.settings.streaming,
            stream_interval=self.settings.stream_interval,
            bot_limit=STREAM_LIMIT if self.settings.streaming == "native" else None,
            charges=SLACK_CHARGES,
        )
        self.client = AsyncWebClient(token=bot_token, base_url=self.settings.api_base_url)
        self.files = FileFetcher(bot_token, self.settings.api_base_url)
        self.identity: SlackIdentity | None = None
        self.normalizer: Normalizer | None = None
        self.receiver: Receiver | None = None
        self._inbox: SlackInbox | None = None
        self._sink: EventSink | None = None
        self._controls = TaskSet(_log)
        self._joined: BoundedMap[str, bool] = BoundedMap(REMEMBERED)
        self._outbound = SlackOutbound(
            self.client, key_rule, self._joined, lambda: self.identity,
            status_text=self.settings.status_text, status_lease=self.settings.status_lease,
        )  # fmt: skip
        self.status = self._outbound.status
        self.streams = self._outbound.streams
        self._last_thread: BoundedMap[tuple[str, str], str] = BoundedMap(REMEMBERED)

    @property
    def health(self) -> Health:
        return self.health_cell.value

    @property
    def durable_inbox(self) -> SlackInbox | None:
        """This run's durable inbox (None before :meth:`start`): a cluster's sweeper
        redelivers through it (docs/cluster.md)."""
        return self._inbox

    # lifecycle -----------------------------------------------------------------------------
    async def start(self, sink: EventSink) -> None:
        """Learn who we are, replay unfinished messages, begin receiving (or return with
        ``health`` down when Slack refuses the token)."""
        try:
            with platform_errors():
                auth = await self.client.auth_test()
        except AdapterError as exc:
            fix = auth_refused(exc.__cause__ or exc, "auth.test")
            if fix is None:
                raise
            self.health_cell.down(fix)
            return
        self.identity = SlackIdentity(str(auth["user_id"]), auth.get("bot_id"))
        self.normalizer = Normalizer(
            self.identity,
            self.key_rule,
            text_prefix=self.settings.text_prefix,
            slash_prefix=self.settings.slash_prefix,
            commands=[name for name, _ in self.settings.commands],
        )
        self._sink = sink
        self._inbox = SlackInbox(self.store, sink, self._revive, notify=self._storage_notice)
        await self._inbox.replay()
        self.receiver = self._receiver(self._bolt_app())
        await self.receiver.start()
        if self.settings.mode == "http":
            self.health_cell.up()
        if self.health_cell.value.state != "down":
            _log.info("slack: receiving as %s (%s mode)", self.identity.user_id, self.settings.mode)

    def _receiver(self, app: AsyncApp) -> Receiver:
        s = self.settings
        if s.mode == "http":
            return HttpReceiver(app, s.http_host, s.http_port, s.http_path, s.signing_secret)
        return SocketReceiver(
            app, s.app_token, s.watchdog_seconds, s.ping_interval,
            health=self.health_cell, sleep=self.sleep,
        )  # fmt: skip

    def _bolt_app(self) -> AsyncApp:
        app = AsyncApp(
            name="commonos",  # named: bolt otherwise reads every caller's source (inspect.stack)
            client=self.client,
            signing_secret=self.settings.signing_secret,
            process_before_response=True,
            # a Socket Mode app has no signing secret: bolt skips verification there
            request_verification_enabled=self.settings.mode == "http",
        )
        app.event("message")(self._on_message)
        app.event("app_mention")(self._on_message)
        app.event("agent_session_stopped")(self._on_session_stopped)
        app.action(re.compile(".*"))(self._on_action)
        app.command(re.compile(".*"))(self._on_command)
        return app

    async def stop(self) -> None:
        """Stop receiving, cancel deliveries in flight (they replay next run)."""
        if self.receiver is not None:
            await self.receiver.stop()
            self.receiver = None
        await self._controls.aclose()
        if self._inbox is not None:
            await self._inbox.close()
        await self.status.aclose()
        await self.streams.aclose()
        await self.files.aclose()
        self.health_cell.stopped()

    async def drain(self) -> None:
        """Wait until the messages received so far have been handled and marked."""
        if self._inbox is not None:
            await self._inbox.drain()

    @property
    def http_url(self) -> str | None:
        """Where Slack posts events in HTTP mode (None in Socket Mode)."""
        return self.receiver.url if isinstance(self.receiver, HttpReceiver) else None

    async def _storage_notice(self, chat: ChatRef) -> None:
        try:
            await self._outbound.send(chat, STORAGE_NOTICE, (), False, None)
        except Exception as exc:
            _log.warning("slack: could not tell %s the store is out: %s", chat, exc)

    # inbound -------------------------------------------------------------------------------
    async def _on_message(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        """A ``message`` or ``app_mention``: stored (once per channel + ts), then the turn
        runs in the background; returning lets bolt acknowledge the envelope."""
        normalizer, inbox = self.normalizer, self._inbox
        if normalizer is None or inbox is None or not normalizer.wanted(event):
            return
        problem = unusable(event)
        if problem is not None:  # a dead letter; the envelope is acknowledged
            await inbox.reject(event, body.get("event_id"), problem)
            return
        place = normalizer.place(event)
        self.streams.asked(place.chat, str(event.get("user") or ""), _team_of(event, body))
        joined = await self._in_thread(str(place.key)) if place.chat_type == "thread" else False
        inbound = normalizer.message(event, joined=joined)
        if inbound is None:
            return
        if place.chat.thread_id is not None and (inbound.mentioned or joined):
            self._last_thread.put((place.chat.chat_id, inbound.sender.id), place.chat.thread_id)
        payload = {"event": event, "event_id": body.get("event_id"), "joined": joined}
        await inbox.receive(inbound, payload)

    def _revive(self, payload: dict[str, Any]) -> InboundEvent | None:
        if self.normalizer is None:
            return None
        event = self.normalizer.message(payload["event"], joined=bool(payload.get("joined")))
        if event is not None:
            self.streams.asked(event.chat, event.sender.id, _team_of(payload["event"], {}))
        return event

    async def _on_session_stopped(self, event: dict[str, Any]) -> None:
        """The agent session's Stop button (``agent_session_stopped``): a ``stop`` event
        when one of the streams Slack stopped is this adapter's live one, else nothing."""
        channel, thread = event.get("channel"), event.get("thread_ts")
        stopped = event.get("streaming_message_ts")
        if self.normalizer is None or not isinstance(channel, str) or not isinstance(thread, str):
            return
        names = [str(ts) for ts in stopped] if isinstance(stopped, list) else []
        stream = self.streams.stopped(channel, thread, names)
        if stream is None:
            _log.debug("slack: agent session stopped in %s:%s, no live stream", channel, thread)
            return
        inbound = self.normalizer.stopped(event, stream.ts)
        if inbound is not None:
            self._control(inbound)

    async def _in_thread(self, key: str) -> bool:
        """Has the agent joined this thread (answered in it, or holds its session)?"""
        if self._joined.get(key):
            return True
        try:
            return await self.store.get_active_session(key) is not None
        except Exception:
            _log.warning("slack: could not look up session %s", key, exc_info=True)
            return False

    async def _on_action(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        event = self.normalizer.press(body) if self.normalizer is not None else None
        if event is not None:
            self._control(event)

    async def _on_command(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        if self.normalizer is None:
            return
        channel, user = str(body.get("channel_id", "")), str(body.get("user_id", ""))
        event = self.normalizer.slash(body, self._last_thread.get((channel, user)))
        if event is not None:
            self._control(event)

    def _control(self, event: InboundEvent) -> None:
        """Presses and slash commands act at once (the control plane), in the background."""
        self._controls.spawn(self._deliver_control(event), name=f"slack-{event.kind}")

    async def _deliver_control(self, event: InboundEvent) -> None:
        if self._sink is not None:
            await self._sink(event)

    # outbound ------------------------------------------------------------------------------
    async def perform(self, call: Call) -> SentMessage | None:
        """One outbound call (:mod:`adapters.calls`, :mod:`adapters.slack.outbound`)."""
        return await self._outbound.perform(call)

    def download(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """An offered file's bytes from ``url_private_download``, with the bot token
        (:mod:`adapters.slack.files`)."""
        return self.files.stream(attachment)


def _team_of(event: dict[str, Any], body: dict[str, Any]) -> str:
    """The team of a message's author (a Slack Connect user's own, when Slack says)."""
    for value in (event.get("user_team"), event.get("team"), body.get("team_id")):
        if isinstance(value, str) and value:
            return value
    return ""
