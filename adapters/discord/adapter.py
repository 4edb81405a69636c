"""The Discord adapter: discord.py's ``Client`` run inside our event loop.

Lifecycle: ``start`` points discord.py at the configured REST base and gateway URL, logs
in, syncs the slash commands when their set changed (:mod:`.commands`), replays what a
previous run left unfinished (:mod:`.inbox`), then connects to the gateway and returns
once READY came and every guild it listed arrived. ``stop`` cancels deliveries in flight
(they replay next run) and closes the client.

Connection: the gateway runs under :class:`adapters.health.Supervisor`
(:mod:`.connection` says which end is retried how); ``health`` is up once READY, retrying
while it reconnects, down after a close no reconnect can fix (a rejected token, refused
intents: one ERROR with the fix), stopped after ``stop``. A payload discord.py cannot
parse, or one our handlers cannot read, is a dead letter (one WARNING); the connection
goes on.

Inbound: every message (DMs, guild channels, threads) and every interaction is stored
before it is handled. A mention in a guild channel opens a thread from that message
(``thread_per_conversation``; Discord allows one thread per message, so a replay finds
the same thread) and the conversation continues there without mentions.

Files (:mod:`.files`): a message's attachments are offered with its event (a mention with
only a file opens a thread too); ``download`` streams one from Discord's CDN; a
``SendFile`` is an upload with its caption, its nonce from the outbox key as for a
``Send``; ``capabilities.upload_limit`` is 10 MiB (a server without boosts).

Outbound (:mod:`.outbound`): no message or edit pings anyone; a reply to a slash command
replaces its deferred response. Sends and edits into one channel are paced by the gateway
inside Discord's channel budget (``CHANNEL_LIMIT``, 5 per 5 s); 429s beyond it are
discord.py's to wait out, and we count them (``rate_limits``). Streaming is ``edit`` or
``off``: Discord has no native stream.

Intents: ``message_content`` (privileged; enable it in the Developer Portal) lets the bot
read guild messages that do not mention it — typed commands and thread follow-ups. Without
it only DMs, mentions and slash commands work.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import discord
import discord.gateway
import discord.http
import yarl

from adapters.base import (
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
from adapters.clock import MONOTONIC, PaceClock
from adapters.discord.commands import build_tree, sync_commands
from adapters.discord.connection import (
    GatewayClient,
    GatewayLink,
    Timing,
    dead_letter_id,
    fatal_cause,
    guard_parsers,
    parse_error,
    raw_json,
)
from adapters.discord.errors import (
    THREAD_EXISTS,
    RateLimitCounter,
    platform_errors,
    translate,
)
from adapters.discord.files import UPLOAD_LIMIT, Downloads
from adapters.discord.inbox import ENVELOPES
from adapters.discord.interactions import (
    BUTTON_PAYLOAD_LIMIT,
    TOKEN_LIFETIME,
    ButtonPress,
    DeferredResponses,
    Responder,
)
from adapters.discord.normalize import (
    PLATFORM,
    Envelope,
    event_of,
    thread_name,
)
from adapters.discord.outbound import DiscordOutbound
from adapters.discord.reading import (
    USER_MESSAGES,
    interaction_envelope,
    known_fields,
    message_envelope,
    unreadable,
)
from adapters.discord.render import MAX_CONTENT, discord_renderer
from adapters.health import Health, HealthCell, Supervisor
from adapters.inbox import STORAGE_NOTICE, DurableInbox, notice_chat
from adapters.session_keys import SessionKeyRule, session_key
from core.attachments import Attachment
from core.store.base import Store, StoreUnavailable
from core.tasks import TaskSet

_log = logging.getLogger(__name__)

NO_PINGS = discord.AllowedMentions.none()
NONCE_LENGTH = 25
DEFAULT_API = "https://discord.com/api/v10"
THREAD_ARCHIVE_MINUTES: Literal[1440] = 1440
CHANNEL_LIMIT = RateLimit(5, 5.0)
"""Discord's per-channel budget for sending and editing messages: about 5 in any 5 s
(research/platform-features-2026.md §3.7); a streamed answer's edits are paced inside it."""
CHANNEL_CHARGES = Charges(chat=frozenset(("send", "edit")))
"""Sends and edits share the channel's window; deletes, typing and press answers do not."""


@dataclass(frozen=True, slots=True)
class DiscordSettings:
    """Everything configurable about the adapter besides the token and the store."""

    api_base: str = DEFAULT_API
    gateway_url: str | None = None
    message_content: bool = True
    thread_per_conversation: bool = True
    guild_ids: tuple[str, ...] = ()
    edit_interval: float = 1.0
    streaming: StreamingMode = "native"
    """``native`` and ``edit`` both edit one message in place (Discord has no native
    stream); ``off``: the reply only when the turn ends."""
    channel_limit: RateLimit | None = CHANNEL_LIMIT
    """Sends and edits into one channel (the gateway paces them; None: not paced)."""
    pace_clock: PaceClock = MONOTONIC
    """The clock the channel windows are measured on (a test's clock in tests)."""
    commands: Sequence[tuple[str, str]] = ()
    thread_openers: frozenset[str] = frozenset({"*"})
    """Whose mention may open a thread (the platform's allowed users and approvers)."""
    ready_timeout: float = 60.0
    guild_ready_timeout: float = 2.0
    interaction_lifetime: float = TOKEN_LIFETIME


def intents_for(settings: DiscordSettings) -> discord.Intents:
    intents = discord.Intents.none()
    intents.guilds = intents.guild_messages = intents.dm_messages = True
    intents.message_content = settings.message_content
    return intents


class DiscordAdapter:
    """The :class:`adapters.base.Adapter` for Discord."""

    platform = PLATFORM

    def __init__(
        self,
        token: str,
        store: Store,
        settings: DiscordSettings | None = None,
        key_rule: SessionKeyRule = session_key,
        timing: Timing | None = None,
    ) -> None:
        self.token = token
        self.store = store
        self.settings = settings or DiscordSettings()
        self.key_rule = key_rule
        self.capabilities = Capabilities(
            max_text_length=MAX_CONTENT,
            length_unit="codepoints",
            supports_edit=True,
            button_payload_limit=BUTTON_PAYLOAD_LIMIT,
            edit_interval=self.settings.edit_interval,
            markup="discord_markdown",
            renderer=discord_renderer(),
            chat_limit=self.settings.channel_limit,
            charges=CHANNEL_CHARGES,
            pace_clock=self.settings.pace_clock,
            upload_limit=UPLOAD_LIMIT,
            streaming="off" if self.settings.streaming == "off" else "edit",
            stream_interval=stream_interval(self.settings),
        )
        self.client: GatewayClient | None = None
        self.syncs = 0
        """Scopes whose slash commands this run synced (0 when the set was unchanged)."""
        self._rate_limits = RateLimitCounter()
        self._sink: EventSink | None = None
        self._inbox = DurableInbox(store, ENVELOPES, self._handle, notify=self._storage_notice)
        self._known = frozenset(name for name, _ in self.settings.commands) | {"reset", "q"}
        self._responders: dict[str, Responder] = {}
        """Slash commands deferred and not yet handed over, by interaction id."""
        self._deferred = DeferredResponses()
        self._presses: dict[str, discord.Interaction] = {}
        self._arrived: dict[str, InboundEvent] = {}
        """Events made as their envelope arrived, by envelope id: its delivery hands over
        that one unless a thread moved it (an envelope revived from the store makes its
        own)."""
        self._connection = TaskSet(_log)
        self._quarantine = TaskSet(_log)
        self.health_cell = HealthCell(PLATFORM)
        self.timing = timing or Timing()
        """The reconnect backoff's clock and sleep (read by ``start``)."""
        self.link: GatewayLink | None = None
        self._downloads = Downloads(_simulated_hosts(self.settings.api_base))
        self._outbound = DiscordOutbound(lambda: self.client, self._deferred, self._presses)

    @property
    def health(self) -> Health:
        """The gateway connection's health (:mod:`adapters.health`)."""
        return self.health_cell.value

    @property
    def durable_inbox(self) -> DurableInbox[Envelope]:
        """This adapter's durable inbox: a cluster's sweeper redelivers through it
        (docs/cluster.md)."""
        return self._inbox

    @property
    def rate_limits(self) -> int:
        """429s discord.py waited out during this run."""
        return self._rate_limits.count

    @property
    def bot_id(self) -> str:
        user = self.client.user if self.client is not None else None
        return str(user.id) if user is not None else ""

    # lifecycle ---------------------------------------------------------------------------
    async def start(self, sink: EventSink) -> None:
        """Log in, sync commands if changed, replay, connect; returns once READY, or with
        ``health`` down when Discord refused the token or the intents."""
        self._sink = sink
        self._point_at_platform()
        client = GatewayClient(
            self, intents=intents_for(self.settings), chunk_guilds_at_startup=False,
            guild_ready_timeout=self.settings.guild_ready_timeout,
        )  # fmt: skip
        client.add_dynamic_items(ButtonPress)
        tree = build_tree(client, self.settings.commands, self.on_command, self.on_command_error)
        self.client = client
        self.link = link = GatewayLink(client, self.health_cell)
        guard_parsers(client, self._poison, link.dispatched)
        logging.getLogger("discord.http").addHandler(self._rate_limits)
        if not await self._login(client):
            return
        with platform_errors():
            self.syncs = await sync_commands(tree, self.store, self.settings.guild_ids)
        await self._inbox.replay()
        connecting = self._connection.spawn(self._supervisor(link).run(), name="discord-gateway")
        if await self._wait_ready(client, connecting):
            _log.info("discord: receiving as %s", client.user)

    async def _login(self, client: GatewayClient) -> bool:
        """False (health down, the fix logged) when Discord rejects the token."""
        try:
            await client.login(self.token)
        except discord.LoginFailure as exc:
            self.health_cell.down(fatal_cause(exc) or str(exc))
            return False
        except discord.DiscordException as exc:
            raise translate(exc) from exc
        return True

    def _supervisor(self, link: GatewayLink) -> Supervisor:
        timing = self.timing
        return Supervisor(
            self.health_cell, link.connect, fatal=fatal_cause, backoff=timing.backoff(),
            clock=timing.clock, sleep=timing.sleep,
        )  # fmt: skip

    def _point_at_platform(self) -> None:
        """discord.py reads its REST base and gateway URL from two class attributes."""
        if self.settings.api_base != DEFAULT_API:
            discord.http.Route.BASE = self.settings.api_base.rstrip("/")
        if self.settings.gateway_url is not None:
            gateway = yarl.URL(self.settings.gateway_url)
            discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = gateway

    async def _wait_ready(self, client: GatewayClient, connecting: asyncio.Task[Any]) -> bool:
        """Until READY and every guild it listed arrived: events are handled from then on
        (discord.py's own ``ready`` waits ``guild_ready_timeout`` more, for nothing).
        False when the connection went down first (its supervisor returned)."""
        ready = asyncio.ensure_future(client.receiving.wait())
        done, _ = await asyncio.wait(
            {ready, connecting}, timeout=self.settings.ready_timeout,
            return_when=asyncio.FIRST_COMPLETED,
        )  # fmt: skip
        if ready in done:
            return True
        ready.cancel()
        if connecting in done:  # the supervisor returns only when the connection is down
            return False
        why = self.health.reason or "no READY"
        raise AdapterError(f"discord: not ready after {self.settings.ready_timeout:g}s ({why})")

    async def stop(self) -> None:
        """Cancel deliveries in flight (they replay next run), end the connection (its
        supervisor first, so the close is not taken for a failure) and close the client."""
        await self._inbox.close()
        await self._connection.aclose()
        if self.client is not None:
            await self.client.close()
        await self._quarantine.aclose(grace=1.0)
        await self._downloads.aclose()
        self.health_cell.stopped()
        logging.getLogger("discord.http").removeHandler(self._rate_limits)

    async def drain(self) -> None:
        await self._quarantine.drain()
        await self._inbox.drain()

    async def _storage_notice(self, chat: ChatRef) -> None:
        try:
            await self._outbound.send(chat, STORAGE_NOTICE, (), False, None)
        except Exception as exc:
            _log.warning("discord: could not tell chat %s the store is out: %s", chat.chat_id, exc)

    # inbound -----------------------------------------------------------------------------
    def _poison(self, event: str, data: Any, exc: Exception) -> None:
        """A gateway payload discord.py could not parse: kept as a dead letter."""
        item_id = dead_letter_id(event, data)
        letter = self._reject(item_id, raw_json(data), parse_error(event, exc))
        self._quarantine.spawn(letter, name=f"discord-dead-letter-{item_id}")

    async def _reject(self, item_id: str, raw: str, error: object) -> None:
        try:
            await self._inbox.intake.reject(item_id, raw, error)
        except StoreUnavailable as exc:
            _log.warning("discord item %s is unreadable and was not kept: %s", item_id, exc)

    async def _reject_tracked(self, item_id: str, raw: str, error: object) -> None:
        """:meth:`_reject` from one of discord.py's event tasks, tracked with the parse
        failures so that :meth:`drain` also waits for it."""
        letter = self._reject(item_id, raw, error)
        await self._quarantine.spawn(letter, name=f"discord-dead-letter-{item_id}")

    async def on_message(self, message: discord.Message) -> None:
        bot_id = self.bot_id
        try:
            if str(message.author.id) == bot_id or message.type not in USER_MESSAGES:
                return
            envelope = message_envelope(message, bot_id, self._known)
        except Exception as exc:
            raw = raw_json(known_fields(message))
            await self._reject_tracked(f"MESSAGE_CREATE:{message.id}", raw, unreadable(exc))
            return
        await self._accept(envelope)

    async def on_command(self, interaction: discord.Interaction, name: str, args: str) -> None:
        """A slash command (already deferred)."""
        text = f"/{name} {args}".strip()
        try:
            envelope = interaction_envelope(
                interaction, "command", command=name, args=args, text=text
            )
        except Exception as exc:
            await self._reject_interaction(interaction, exc)
            return
        self._responders[str(interaction.id)] = Responder(
            interaction, time.monotonic(), self.settings.interaction_lifetime
        )
        await self._accept(envelope)

    async def on_command_error(
        self, interaction: discord.Interaction, error: discord.app_commands.AppCommandError
    ) -> None:
        """A slash command discord.py could not map to ours (options of an odd shape)."""
        await self._reject_interaction(interaction, error)

    async def _reject_interaction(self, interaction: discord.Interaction, exc: Exception) -> None:
        raw = raw_json({"id": str(interaction.id), "type": interaction.type.value,
                        "data": interaction.data})  # fmt: skip
        await self._reject_tracked(f"INTERACTION_CREATE:{interaction.id}", raw, unreadable(exc))

    async def on_press(self, interaction: discord.Interaction, custom_id: str) -> None:
        """A button press: read, deferred at once, then stored and handed over."""
        message_id = str(interaction.message.id) if interaction.message else ""
        try:
            envelope = interaction_envelope(
                interaction, "press", custom_id=custom_id, message_id=message_id
            )
        except Exception as exc:
            await self._reject_interaction(interaction, exc)
            return
        try:
            await interaction.response.defer()
        except discord.DiscordException as exc:
            _log.info("discord: press %s not deferred: %s", interaction.id, exc)
        self._presses[str(interaction.id)] = interaction
        await self._accept(envelope)

    async def _accept(self, envelope: Envelope) -> None:
        event = self._arrived[envelope.id] = event_of(envelope, self.key_rule)
        try:
            taken = await self._inbox.accept(envelope, str(event.session_key), notice_chat(event))
        except Exception:
            _log.exception("discord item %s could not be stored; dropped", envelope.id)
            taken = False
        if not taken:  # known already, quarantined or lost: nothing will answer it
            self._arrived.pop(envelope.id, None)
            self._responders.pop(envelope.id, None)
            self._presses.pop(envelope.id, None)

    async def _handle(self, envelope: Envelope) -> InboundEvent | None:
        """Deliver one stored envelope: open its thread if it asks for one, then the sink."""
        assert self._sink is not None
        arrived = self._arrived.pop(envelope.id, None)
        thread = await self._thread_for(envelope)
        if arrived is None or thread is not None:
            event = event_of(envelope, self.key_rule, thread)
        else:
            event = arrived
        responder = self._responders.pop(envelope.id, None)
        if responder is None:  # a message or a press: no deferred response to open
            await self._sink(event)
        else:
            async with self._deferred.handling(responder):
                await self._sink(event)
        return event

    async def _thread_for(self, envelope: Envelope) -> str | None:
        """The thread a channel mention continues in (opened once per message)."""
        if not self._opens_thread(envelope) or self.client is None:
            return None
        name = thread_name(envelope.text)
        try:
            thread = await self.client.http.start_thread_with_message(
                int(envelope.channel_id), int(envelope.id), name=name,
                auto_archive_duration=THREAD_ARCHIVE_MINUTES,
            )  # fmt: skip
        except discord.HTTPException as exc:
            if exc.code == THREAD_EXISTS:
                return envelope.id  # a thread started from a message has the message's id
            _log.warning("discord: no thread for message %s (%s); answering in place",
                         envelope.id, exc)  # fmt: skip
            return None
        return str(thread["id"])

    def _opens_thread(self, envelope: Envelope) -> bool:
        openers = self.settings.thread_openers
        return (
            self.settings.thread_per_conversation
            and envelope.kind == "message"
            and envelope.chat_type == "channel"
            and envelope.mentioned
            and not envelope.author_bot
            and bool(envelope.text.strip() or envelope.attachments)
            and ("*" in openers or envelope.author_id in openers)
        )

    # outbound ----------------------------------------------------------------------------
    async def perform(self, call: Call) -> SentMessage | None:
        """One outbound call (:mod:`adapters.calls`, :mod:`.outbound`)."""
        return await self._outbound.perform(call)

    def download(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """An offered attachment's bytes, streamed from Discord's CDN (:mod:`.files`)."""
        return self._downloads.stream(attachment)


def stream_interval(settings: DiscordSettings) -> float:
    """Fewest seconds between two edits of a streamed answer: the channel's budget spread
    evenly (5 per 5 s: one a second), never faster than ``edit_interval``."""
    limit = settings.channel_limit
    even = limit.seconds / limit.count if limit is not None else 0.0
    return max(settings.edit_interval, even)


def _simulated_hosts(api_base: str) -> tuple[str, ...]:
    """A configured REST base's host serves attachments too (a simulator's, in tests)."""
    if api_base == DEFAULT_API:
        return ()
    host = yarl.URL(api_base).host
    return (host,) if host else ()
