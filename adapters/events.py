"""The values of the adapter port: one inbound event and what it names — the conversation
(:class:`SessionKey`), the chat (:class:`ChatRef`), the sender, buttons, a message that
was sent — and the :class:`Receipt` its handling settles.

They stand below both the port (:mod:`adapters.base`, which re-exports them: import them
from there) and the outbound call values (:mod:`adapters.calls`), which the port names
in ``Adapter.perform``; docs/architecture.md §2.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from core.attachments import Attachment

ChatType = Literal["dm", "group", "channel", "thread"]
EventKind = Literal["text", "command", "button", "stop"]
"""``stop``: the platform's own Stop control on a live streamed answer was used (Telegram's
``stopped_message_generation``, Slack's ``agent_session_stopped``); the router ends the
session's running turn as ``/stop`` does, and does nothing (no reply) when none runs."""


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


ButtonRows = Sequence[Sequence[Button]]
