"""The adapter port: what every chat platform adapter is, and the values it trades in.

An adapter turns platform updates into :class:`InboundEvent` values (each with a
:class:`SessionKey`) and renders outbound text, edits and buttons back. Platform
differences are data (:class:`Capabilities`), never optional methods that raise.

Errors: adapters translate their SDK's exceptions into this tree at the edge::

    AdapterError
      RateLimited(retry_after)   flood control; retry after the given seconds
      MessageGone                the message to edit/delete no longer exists
      NotModified                an edit with identical content (not a failure)
      TooLong                    text over the platform limit
      Forbidden                  bot blocked / not in chat / no permission
      BadMarkup                  the platform could not parse our markup
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from adapters.health import Health
from adapters.render import LengthUnit, Renderer
from core.attachments import Attachment

if TYPE_CHECKING:
    from adapters.calls import Call

ChatType = Literal["dm", "group", "channel", "thread"]
EventKind = Literal["text", "command", "button", "stop"]
"""``stop``: the platform's own Stop control on a live streamed answer was used (Telegram's
``stopped_message_generation``, Slack's ``agent_session_stopped``); the router ends the
session's running turn as ``/stop`` does, and does nothing (no reply) when none runs."""
StreamingMode = Literal["native", "edit", "off"]
"""How a chat shows an answer as the model writes it (``[<platform>] streaming``):
``native`` the platform's own stream (Telegram drafts in private chats, Slack chat streams;
where it is refused, edits), ``edit`` one message edited in place, ``off`` the whole reply
at the end (docs/architecture.md, "Streaming")."""
Markup = Literal["telegram_html", "discord_markdown", "slack_mrkdwn", "markdown", "plain"]
"""``markdown``: CommonMark passed through as is; the adapter renders it (the web chat)."""


@dataclass(frozen=True, slots=True)
class SessionKey:
    """Which conversation a message belongs to; ``str()`` is the canonical stored form.

    ``telegram:dm:<chat>``, ``telegram:group:<chat>:<user>``,
    ``telegram:thread:<chat>:<topic>``, ``discord:thread:<thread>``,
    ``slack:channel:<channel>:<thread_ts>``. Whether a group key carries the user is
    the configured strategy (per user by default, or shared).
    """

    platform: str
    chat_type: ChatType
    chat_id: str
    thread_id: str | None = None
    user_id: str | None = None

    def __str__(self) -> str:
        parts = [self.platform, self.chat_type, self.chat_id]
        if self.thread_id is not None:
            parts.append(self.thread_id)
        if self.user_id is not None:
            parts.append(self.user_id)
        return ":".join(parts)


@dataclass(frozen=True, slots=True)
class ChatRef:
    """Where to send: a chat, and a thread/topic inside it when there is one."""

    platform: str
    chat_id: str
    thread_id: str | None = None


@dataclass(frozen=True, slots=True)
class Sender:
    id: str
    name: str
    is_bot: bool = False


ButtonRole = Literal["approve", "deny", "always", "stop", "choice"]
"""What a button means, so an adapter styles it without reading its payload: ``approve``
(green/primary), ``deny`` (red/danger), ``always`` (approve for good), ``stop`` (ends the
running turn), ``choice`` (a neutral option)."""


@dataclass(frozen=True, slots=True)
class Button:
    label: str
    data: str
    """Opaque payload returned on press; must fit ``Capabilities.button_payload_limit``."""
    role: ButtonRole = "choice"


@dataclass(frozen=True, slots=True)
class SentMessage:
    chat: ChatRef
    message_id: str


class Receipt:
    """How an inbound event's handling ended; open until settled, the first settlement
    wins. Made outside an event loop too (it is a plain value's field).

    It travels with the event (:attr:`InboundEvent.receipt`); the durable inbox
    that stored the item awaits it and marks the item done only when it says True
    (:mod:`adapters.inbox`, ``docs/architecture.md`` §3 step 10). The sink (the gateway's
    router) either handles the event whole before it returns — a command, a press, a folded
    or refused message: the receipt is settled True as the sink returns
    (:meth:`Receipt.sink_returned`) — or has it :meth:`~Receipt.follow` the work that goes on
    after: a turn, whose outcome is True once its reply was delivered (or the queued message
    was dropped by ``/stop``) and False when a shutdown cut it short, so the item replays.

    With several processes (docs/cluster.md) the event may be *handed over*
    (:meth:`hand_over`): another process handles it and marks the item done; the inbox of
    this run then neither marks it nor replays it.
    """

    __slots__ = ("_delivered", "_followed", "_handed_over", "_over")

    def __init__(self) -> None:
        self._over = asyncio.Event()
        self._delivered = False
        self._followed = False
        self._handed_over = False

    def settle(self, delivered: bool) -> None:
        """The handling is over: ran to its end (True) or was cut short (False)."""
        if not self._over.is_set():
            self._delivered = delivered
            self._over.set()

    def follow(self, outcome: asyncio.Future[bool]) -> None:
        """Settle with ``outcome`` once it is done (cancelled or failed: False)."""
        self._followed = True
        outcome.add_done_callback(self._settle_from)

    def hand_over(self) -> None:
        """Another process handles the event now (it marks the item done): settled False,
        and :attr:`handed_over` tells the inbox not to replay it in this run."""
        if not self._over.is_set():
            self._handed_over = True
            self.settle(False)

    @property
    def handed_over(self) -> bool:
        return self._handed_over

    def sink_returned(self) -> None:
        """The sink is done with the event: settled True unless it follows an outcome."""
        if not self._followed:
            self.settle(True)

    @property
    def settled(self) -> bool:
        return self._over.is_set()

    async def wait(self) -> bool:
        """Until settled; True when the handling ran to its end."""
        await self._over.wait()
        return self._delivered

    def _settle_from(self, outcome: asyncio.Future[bool]) -> None:
        ok = not outcome.cancelled() and outcome.exception() is None
        self.settle(ok and outcome.result())


@dataclass(frozen=True, slots=True)
class InboundEvent:
    """One normalised platform update.

    ``kind == "command"``: ``command`` is the lower-cased name without ``/`` or
    ``@botname``, ``args`` the rest. ``kind == "button"``: ``button_data`` is the pressed
    button's payload and ``message`` the message carrying it; ``press_id`` is what the
    adapter needs to answer the press (callback query id, interaction id, ...).
    ``receipt`` is this event's own :class:`Receipt` (not part of its
    value: never compared nor shown; ``dataclasses.replace`` keeps it).
    ``kind == "stop"``: ``stream_id`` names the live stream whose Stop control was used
    (the adapter emits it only while that stream is live).
    ``attachments`` are the files the message carries, *offered* (not yet downloaded:
    :mod:`core.attachments`); a caption is the message's ``text``. The gateway downloads
    them with :meth:`Adapter.download` once the sender is admitted (docs/attachments.md).
    """

    kind: EventKind
    platform: str
    update_id: str
    chat: ChatRef
    chat_type: ChatType
    sender: Sender
    session_key: SessionKey
    text: str = ""
    command: str | None = None
    args: str = ""
    button_data: str | None = None
    message: SentMessage | None = None
    press_id: str | None = None
    mentioned: bool = False
    reply_to_bot: bool = False
    attachments: tuple[Attachment, ...] = ()
    stream_id: str | None = None
    source: SentMessage | None = None
    """The user's message itself (a text or command event: its chat and Telegram
    ``message_id``, Discord message id or Slack ``ts``): what a status reaction marks."""
    receipt: Receipt = field(default_factory=Receipt, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``count`` calls in any ``seconds``-long window (a sliding window); with a
    ``burst``, a token bucket instead: up to ``burst`` calls at once, refilled ``count`` per
    ``seconds`` (gateway/outbound/windows.py)."""

    count: int
    seconds: float
    burst: int | None = None


CallKind = Literal["send", "edit", "delete", "answer", "typing", "live", "seal", "react"]
"""What an outbound call does, as a platform's rate limits tell calls apart: a new message,
an edit, a delete, a button press's answer, a typing indicator, streamed live text, the
end of a stream (a ``LiveText`` "seal", or "" clearing it: Telegram makes no call), a
status reaction on a user's message (``React``)."""
EVERY_CALL: frozenset[CallKind] = frozenset(
    ("send", "edit", "delete", "answer", "typing", "live", "seal", "react")
)
MESSAGES: frozenset[CallKind] = frozenset(("send", "edit", "delete"))
"""Calls that make, change or remove a message. A status reaction (``react``) is none: no
platform counts one in a chat's message budget."""


@dataclass(frozen=True, slots=True)
class Charges:
    """Which call kinds each of a platform's rate windows counts (docs/architecture.md,
    "The outbound scheduler"): a call occupies only the windows that count its kind, so a
    button answer or a typing indicator never takes a reply's place in a chat's budget
    where the platform does not count them."""

    bot: frozenset[CallKind] = EVERY_CALL
    chat: frozenset[CallKind] = MESSAGES
    group: frozenset[CallKind] = MESSAGES


class PaceClock(Protocol):
    """The clock rate windows are measured on, and how the scheduler waits on it (a test
    passes one that skips the wait: ``tests/support/clock.py``)."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    """The real clock: ``time.monotonic`` and ``asyncio.sleep``."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


MONOTONIC = MonotonicClock()


def _plain_renderer() -> Renderer:
    from adapters.render.markdown import PLAIN  # markdown-it-py loads on first use

    return PLAIN


@dataclass(frozen=True, slots=True)
class Capabilities:
    max_text_length: int
    length_unit: LengthUnit
    supports_edit: bool
    button_payload_limit: int
    """Bytes of payload a button can carry (Telegram 64, Discord 100, Slack 2000)."""
    edit_interval: float
    """Minimum seconds between edits of one message that the platform tolerates."""
    markup: Markup
    renderer: Renderer = field(default_factory=_plain_renderer)
    """Markdown → this platform's markup, its chunker and its plain fallback."""
    progress_buttons: tuple[Button, ...] = ()
    """Buttons the live progress message carries while its turn runs (e.g. a Stop button
    whose press the adapter delivers as the ``stop`` command); removed when it ends."""
    bot_limit: RateLimit | None = None
    """Outbound calls of the whole bot (the kinds ``charges.bot`` names)."""
    chat_limit: RateLimit | None = None
    """Outbound calls into one chat (the kinds ``charges.chat`` names)."""
    group_limit: RateLimit | None = None
    """Outbound calls into one shared chat (group, channel, thread), on top of
    ``chat_limit`` (the kinds ``charges.group`` names). ``None`` for any of the three: not
    paced by the gateway."""
    charges: Charges = field(default_factory=Charges)
    """Which call kinds each window counts: what the platform counts, nothing more."""
    pace_clock: PaceClock = MONOTONIC
    """The clock the windows are measured on (a test's clock in tests)."""
    upload_limit: int = 0
    """Bytes of the largest file a bot may send (``SendFile``); 0: it cannot send files."""
    streaming: StreamingMode = "off"
    """How this bot shows an answer while it is written (``LiveText`` calls at ``STREAM``
    priority in ``native`` mode — the adapter raises :class:`StreamRefused` for a chat that
    cannot take them —, ``Send``/``Edit`` of one message in ``edit`` mode). The web chat
    keeps ``off`` here: it has :attr:`live_text`."""
    stream_interval: float = 1.0
    """Fewest seconds between two updates of one streamed answer."""
    stream_keepalive: float | None = None
    """A native stream the platform drops when not refreshed (Telegram drafts, ~30 s) is
    sent again at least this often while its turn runs; None: never."""
    stream_progress: bool = False
    """In ``native`` mode, tool progress is shown inside the stream instead of as its own
    message (Telegram: any real message from the bot dismisses a draft)."""
    live_text: bool = False
    """The chat can show a streaming reply's text as it arrives: the adapter then makes
    ``LiveText`` calls (see :mod:`gateway.turns.live_text`); else the gateway sends none."""


EventSink = Callable[[InboundEvent], Awaitable[None]]


class AdapterError(Exception):
    """A platform call failed; subclasses say how."""


class RateLimited(AdapterError):
    def __init__(self, retry_after: float, message: str = "rate limited") -> None:
        super().__init__(f"{message} (retry after {retry_after}s)")
        self.retry_after = retry_after
        self.final = False
        """Set by the retry layer that gave up on the call: nobody retries it again."""


class MessageGone(AdapterError):
    pass


class NotModified(AdapterError):
    pass


class TooLong(AdapterError):
    pass


class Forbidden(AdapterError):
    pass


class BadMarkup(AdapterError):
    pass


class StreamRefused(AdapterError):
    """This chat cannot show a native stream (a Telegram group, ``TEXTDRAFT_PEER_INVALID``,
    a Slack stream refused): the gateway shows answers there by edits from now on."""


class DownloadFailed(AdapterError):
    """An attachment could not be fetched (gone, refused, the connection broke); the
    message says why in words a user can read."""


ButtonRows = Sequence[Sequence[Button]]


class Adapter(Protocol):
    """A chat platform: its lifecycle, its health, and one outbound method, like an httpx
    transport's ``handle_async_request``: :meth:`perform` makes one call value
    (:mod:`adapters.calls`). A call's ``text`` is already in ``capabilities.markup`` unless
    its ``markup`` is False (plain text, the fallback when markup is rejected)."""

    platform: str
    capabilities: Capabilities

    @property
    def health(self) -> Health:
        """Where the platform connection stands now (``adapters.health``; read by
        ``/healthz``, ``/metrics`` and the dashboard, docs/architecture.md §10)."""
        ...

    async def start(self, sink: EventSink) -> None:
        """Connect and begin delivering events to ``sink``; returns once receiving, or with
        ``health`` down when the platform refused us for good (a rejected token, an address
        in use): that is reported through ``health``, not raised."""
        ...

    async def stop(self) -> None: ...

    def download(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """The bytes of an offered attachment this adapter made (its ``source``), in
        chunks as they arrive — never the whole file in memory. The caller stops early
        (``aclose``) when the file is over its limit. Failures raise
        :class:`DownloadFailed`."""
        ...

    async def perform(self, call: Call) -> SentMessage | None:
        """Make one outbound call: a ``Send`` (or ``SendFile``) returns the message that
        arrived, every other call None. ``AnswerPress`` is always made for a press (the
        answer may be empty); ``Typing`` shows the indicator once (the caller refreshes it).
        Failures raise the error tree above."""
        ...
