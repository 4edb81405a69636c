"""What one browser conversation shows, as numbered events a page can resume from.

A :class:`Feed` is the live state of one conversation: its messages (the user's, the
bot's replies, progress, approval cards, notices — each with its current HTML and
buttons) and an append-only stream of numbered events that changed them::

    message {id, role, html, buttons}    a new message (each button {label, data, role})
    edit    {id, html, buttons}          a message changed in place
    delete  {id}                         a message removed
    busy    {busy}                       a turn started / every sent message is settled

Event ids are ``"<epoch>-<seq>"``: ``seq`` counts up within one server run, ``epoch``
names the run. A page that reconnects with ``Last-Event-ID`` gets exactly the events after
it (:meth:`Feed.since`), so nothing is shown twice and nothing is skipped; when the id is
from another run or older than the kept window, it gets a ``snapshot`` of the messages
instead (:meth:`Feed.snapshot`), whose id is the cursor the next events follow.

Ephemeral signals (typing, a toast answering a button press) carry no id: they are not
replayed.

**The live reply** (a streaming profile's text as it arrives) is ephemeral too::

    delta   {text}               text added to the live reply (one is started if none)
    live    {text}               the live reply is now ``text`` ("" removes it)

The feed keeps the live text (:attr:`Feed.live`) so a page that connects mid-reply gets
it whole as one ``live`` signal. Once sealed (the turn ended), the next bot message or
edit with markup is the reply: its event carries ``"endsLive": true`` and the page puts
the reply where the live text was. A live reply never replaced (a reply suppressed by
``/stop``) is dropped when the conversation is no longer busy.

Memory is bounded: ``window`` events and ``max_messages`` messages per feed, and
:class:`Feeds` keeps at most ``capacity`` conversations (least recently used forgotten —
their history still loads from the store).
"""

from __future__ import annotations

import asyncio
import secrets
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from core.bounded import BoundedMap

EVENT_WINDOW = 2000
MAX_MESSAGES = 500
FEED_CAPACITY = 1000

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class FeedEvent:
    kind: str
    data: Json
    id: str | None = None
    """``"<epoch>-<seq>"`` for state changes; None for ephemeral signals."""


@dataclass(slots=True)
class Feed:
    epoch: str
    window: int = EVENT_WINDOW
    max_messages: int = MAX_MESSAGES
    messages: dict[str, Json] = field(default_factory=dict)
    events: deque[tuple[int, FeedEvent]] = field(default_factory=deque)
    seq: int = 0
    busy: int = 0
    """Sent messages not yet settled (their turn still running or queued)."""
    live: str = ""
    """The live reply's text so far ("" when none is shown)."""
    live_sealed: bool = False
    """The turn ended: the next reply replaces the live text."""
    history_loaded: bool = False
    """The conversation's stored history is in ``messages`` (a feed made first for a
    replayed message's busy state gets it on its first read)."""
    _listeners: set[asyncio.Queue[FeedEvent]] = field(default_factory=set)

    # changing ------------------------------------------------------------------------
    def add(self, message: Json, *, reply: bool = False) -> FeedEvent:
        """A new message; ``reply``: it may be the reply a sealed live text awaits."""
        self.messages[message["id"]] = message
        while len(self.messages) > self.max_messages:
            self.messages.pop(next(iter(self.messages)))
        return self._publish("message", self._ending_live(message, reply))

    def edit(self, message_id: str, changes: Json, *, reply: bool = False) -> FeedEvent | None:
        current = self.messages.get(message_id)
        if current is None:
            return None
        current.update(changes)
        return self._publish("edit", self._ending_live({"id": message_id, **changes}, reply))

    def live_text(self, text: str, mode: str) -> None:
        """Change the live reply: ``append``, ``replace`` or ``seal`` (see the module)."""
        if mode == "seal":
            self.live_sealed = bool(self.live)
            return
        if self.live_sealed:  # a sealed reply that never came: a new one starts
            self._set_live("")
        if mode == "append" and text:
            self.live += text
            self.signal("delta", {"text": text})
        elif mode == "replace":
            self._set_live(text)

    def _set_live(self, text: str) -> None:
        if text != self.live or self.live_sealed:
            self.live, self.live_sealed = text, False
            self.signal("live", {"text": text})

    def _ending_live(self, data: Json, reply: bool) -> Json:
        if not (reply and self.live_sealed):
            return data
        self.live, self.live_sealed = "", False
        return {**data, "endsLive": True}

    def delete(self, message_id: str) -> FeedEvent | None:
        if self.messages.pop(message_id, None) is None:
            return None
        return self._publish("delete", {"id": message_id})

    def set_busy(self, delta: int) -> None:
        was = self.busy > 0
        self.busy = max(0, self.busy + delta)
        if (self.busy > 0) != was:
            self._publish("busy", {"busy": self.busy > 0})
        if self.busy == 0:
            self.live, self.live_sealed = "", False  # the page drops it on busy: false

    def signal(self, kind: str, data: Json) -> None:
        """An ephemeral signal to the pages listening now (never replayed)."""
        self._fan_out(FeedEvent(kind, data))

    def _publish(self, kind: str, data: Json) -> FeedEvent:
        self.seq += 1
        event = FeedEvent(kind, data, f"{self.epoch}-{self.seq}")
        self.events.append((self.seq, event))
        while len(self.events) > self.window:
            self.events.popleft()
        self._fan_out(event)
        return event

    def _fan_out(self, event: FeedEvent) -> None:
        for queue in self._listeners:
            queue.put_nowait(event)

    # reading ------------------------------------------------------------------------
    def cursor(self) -> str:
        return f"{self.epoch}-{self.seq}"

    def snapshot(self) -> FeedEvent:
        """Every message as it stands now; its id is the cursor later events follow."""
        data = {"messages": list(self.messages.values()), "busy": self.busy > 0}
        return FeedEvent("snapshot", data, self.cursor())

    def since(self, last_event_id: str | None) -> list[FeedEvent] | None:
        """The events after ``last_event_id``; None when they are not all kept (another
        run's id, or older than the window): the caller then sends a snapshot."""
        seq = self._seq_of(last_event_id)
        if seq is None or seq > self.seq:
            return None
        oldest = self.events[0][0] if self.events else self.seq + 1
        if seq < oldest - 1:
            return None
        return [event for number, event in self.events if number > seq]

    def _seq_of(self, last_event_id: str | None) -> int | None:
        epoch, _, seq = (last_event_id or "").partition("-")
        if epoch != self.epoch or not seq.isascii() or not seq.isdigit():
            return None
        return int(seq)

    def listen(self) -> asyncio.Queue[FeedEvent]:
        """A queue receiving every event from now on; :meth:`unlisten` it when done."""
        queue: asyncio.Queue[FeedEvent] = asyncio.Queue()
        self._listeners.add(queue)
        return queue

    def unlisten(self, queue: asyncio.Queue[FeedEvent]) -> None:
        self._listeners.discard(queue)

    @property
    def listeners(self) -> int:
        return len(self._listeners)


class Feeds:
    """The feed of every conversation seen in this run (bounded, least recently used out)."""

    def __init__(self, capacity: int = FEED_CAPACITY) -> None:
        self.epoch = secrets.token_hex(4)
        self._feeds: BoundedMap[str, Feed] = BoundedMap(capacity)

    def get(self, conversation: str, history: list[Json] | None = None) -> Feed:
        """The conversation's feed, created when new; ``history`` (its stored messages)
        goes before what it shows, once."""
        feed = self._feeds.get(conversation)
        if feed is None:
            feed = Feed(self.epoch)
        if history is not None and not feed.history_loaded:
            shown = feed.messages
            feed.messages = {message["id"]: message for message in history}
            feed.messages.update(shown)
            feed.history_loaded = True
        self._feeds.put(conversation, feed)
        return feed

    def known(self, conversation: str) -> bool:
        """The conversation has a feed with its history loaded."""
        feed = self._feeds.get(conversation)
        return feed is not None and feed.history_loaded

    @property
    def listeners(self) -> int:
        return sum(feed.listeners for feed in self._feeds.values())
