"""The adapter port: what every chat platform adapter is, and the values it trades in.

An adapter turns platform updates into :class:`InboundEvent` values (each with a
:class:`SessionKey`) and renders outbound text, edits and buttons back. Platform
differences are data (:class:`Capabilities`), never optional methods that raise. The
event values live in :mod:`adapters.events` (below the call values of :mod:`adapters.calls`,
which :meth:`Adapter.perform` takes) and are re-exported here: import them from this module.

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

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from adapters.calls import Call
from adapters.clock import MONOTONIC, PaceClock
from adapters.events import (
    Button,
    ButtonRole,
    ButtonRows,
    ChatRef,
    ChatType,
    EventKind,
    InboundEvent,
    Receipt,
    Sender,
    SentMessage,
    SessionKey,
)
from adapters.health import Health
from adapters.render import LengthUnit, Renderer
from core.attachments import Attachment

__all__ = [
    "EVERY_CALL",
    "MESSAGES",
    "Adapter",
    "AdapterError",
    "BadMarkup",
    "Button",
    "ButtonRole",
    "ButtonRows",
    "CallKind",
    "Capabilities",
    "Charges",
    "ChatRef",
    "ChatType",
    "DownloadFailed",
    "EventKind",
    "EventSink",
    "Forbidden",
    "InboundEvent",
    "Markup",
    "MessageGone",
    "NotModified",
    "RateLimit",
    "RateLimited",
    "Receipt",
    "Sender",
    "SentMessage",
    "SessionKey",
    "StreamRefused",
    "StreamingMode",
    "TooLong",
]

StreamingMode = Literal["native", "edit", "off"]
"""How a chat shows an answer as the model writes it (``[<platform>] streaming``):
``native`` the platform's own stream (Telegram drafts in private chats, Slack chat streams;
where it is refused, edits), ``edit`` one message edited in place, ``off`` the whole reply
at the end (docs/architecture.md, "Streaming")."""
Markup = Literal["telegram_html", "discord_markdown", "slack_mrkdwn", "markdown", "plain"]
"""``markdown``: CommonMark passed through as is; the adapter renders it (the web chat)."""


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
