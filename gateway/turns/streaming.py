"""A streamed answer: the reply shown while the model writes it (docs/architecture.md §13).

Where a bot declares ``Capabilities.streaming`` ``native`` or ``edit`` (and the chat is not
the web's :mod:`gateway.turns.live_text` path), each turn gets one :class:`StreamedReply` as the
engine's ``on_text`` listener. It keeps the newest text (:func:`gateway.turns.live_text.visible`:
redacted, cut at the last whitespace) and one tracked task writes it through the bot's
pipeline, at ``Priority.STREAM`` (below progress), as a :class:`~gateway.outbound.pipeline.Latest`
call: what is sent is read when the budget lets the call start, so a waiting update is
always the newest text (coalesced). The first update waits until the stream has had
something to show for :data:`FIRST_UPDATE_SECONDS`: an answer complete sooner is handed
over before anything was streamed and goes out as one message, never drafted first::

    native   LiveText(chat, <full text>, "replace") no faster than ``stream_interval``,
             re-sent every ``stream_keepalive`` while the turn runs (a draft the platform
             drops when not refreshed); sealed (``LiveText(chat, "", "seal")``) when the
             answer follows, which the adapter makes take the stream's place
    edit     a plain Send, then Edits of that message, no faster than
             max(``stream_interval``, ``edit_interval``); :meth:`StreamedReply.hand_over`
             gives the message to the reply (``Delivery.reply(into=...)``): its first
             chunk replaces it, no extra message

A chat that refuses a native stream (the adapter raises :class:`~adapters.base.StreamRefused`)
is shown answers by edits from then on, this turn and later ones (kept per bot in memory,
one INFO line). With ``stream_progress`` in native mode the turn's tool steps are a status
line above the answer inside the stream (:meth:`StreamedReply.show_step`; the progress view
then sends no message). A ``ReplyTextReset`` replaces the text. A stopped or failed turn
clears the stream (native: ``replace`` with ""; edit: its message deleted). Time is the
service's injected clock and sleep (:class:`gateway.service.Pacing`).

**A stream cut by a crash.** Given the store, the stream's message (edit mode: the first
``Send``'s; native: the one the adapter answers a ``LiveText`` with — a Slack chat stream's,
a Telegram draft has none) is recorded per session key (:class:`~core.store.base.StreamRecord`)
once the platform has it, and forgotten when the stream is cleared or its answer delivered
(:meth:`StreamedReply.clear`, which the turn's end always calls). A process killed between
leaves the record; the session's next stream — the replayed turn's, after the restart —
takes that message over before it shows anything: it streams by edits of it (a native
stream too, this once), and the reply's first chunk replaces it (:meth:`hand_over`), or a
stopped turn deletes it. The answer is shown once, in the cut message's place, never beside
it. A recorded message that is gone (an edit of it fails) is forgotten and the stream goes
on as if there were none; one in another chat is deleted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Literal

from adapters.base import (
    AdapterError,
    ChatRef,
    MessageGone,
    NotModified,
    RateLimited,
    SentMessage,
    StreamRefused,
)
from adapters.calls import Delete, Edit, LiveMode, LiveText, Priority, Send
from adapters.render.units import measure
from core.agent.step import ReplyTextReset, TextEvent
from core.bounded import BoundedMap
from core.cancellation import CancellationToken
from core.store.base import Store, StoreError, StreamRecord
from core.tasks import TaskSet
from gateway.outbound.directory import Place
from gateway.outbound.pipeline import Latest, Outbound
from gateway.outbound.rate_limits import Sleep
from gateway.turns.live_text import END_SECONDS, visible
from gateway.turns.progress import FINISH_SECONDS

logger = logging.getLogger(__name__)

StreamMode = Literal["native", "edit"]
PLACEHOLDER = "…"
"""An edited stream's text while it has none (after a reset): a message cannot be empty."""
REMEMBERED_REFUSALS = 10_000
"""Chats remembered as refusing native streams (oldest forgotten first)."""
FIRST_UPDATE_SECONDS = 0.5
"""How long a stream has had something to show (text, or a tool step) before its first
update goes out: an answer complete sooner is sent as one message, never streamed first."""

Refused = Callable[[ChatRef, StreamRefused], None]


class StreamedReply:
    """The engine's ``on_text`` for one turn in one chat (see the module docstring)."""

    def __init__(
        self,
        outbound: Outbound,
        chat: ChatRef,
        mode: StreamMode,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        on_refused: Refused | None = None,
        end_timeout: float = END_SECONDS,
        finish_timeout: float = FINISH_SECONDS,
        first_update: float = FIRST_UPDATE_SECONDS,
        token: CancellationToken | None = None,
        session_key: str = "",
        store: Store | None = None,
    ) -> None:
        self._outbound, self._chat, self._mode = outbound, chat, mode
        self._session_key, self._store = session_key, store
        self._recorded: str | None = None
        self._putting: asyncio.Future[None] | None = None
        """The store's write of the recorded message (awaited before the record is dropped:
        a write the stream's stop cut off still lands, then goes)."""
        """The message id the store keeps for this session's stream (see the module)."""
        self._looked = store is None
        """The store was asked for a message a cut stream left (once, before anything)."""
        self._cut: SentMessage | None = None
        """That message, taken over while no edit of it failed."""
        self._token = token
        """The turn's: once it is cancelled (``/stop``, the stream's own Stop) nothing more
        is drawn — no new text, no keepalive — until the stream is cleared."""
        self._first_update = first_update
        self._has_content_since: float | None = None
        """When the stream first had something to show (the first update waits for
        ``first_update`` after it)."""
        self._caps = outbound.capabilities
        self._clock, self._sleep = clock, sleep
        self._on_refused = on_refused
        self._end_timeout = end_timeout
        """Time box of the seal or the clearing call."""
        self._finish_timeout = finish_timeout
        """How long an update in flight is waited for when the stream ends (its message
        must be known to be handed over), as :meth:`ProgressView.hand_over` does."""
        self.shows_progress = mode == "native" and self._caps.stream_progress
        """Tool steps are shown inside the stream (no progress message)."""
        self._answer = ""
        self._status = ""
        self._shown: str | None = None
        self._writing: str | None = None
        self._message: SentMessage | None = None
        self._last_write = float("-inf")
        self._refresh = self._in_flight = self._ended = self._broken = False
        self._wake = asyncio.Event()
        self._task = TaskSet(logger)
        self._coalesce = ("stream", chat)

    @property
    def mode(self) -> StreamMode:
        return self._mode

    # feeding (never waits) --------------------------------------------------------------
    def __call__(self, event: TextEvent) -> None:
        """The engine's ``on_text``: the newest answer text (a reset empties it)."""
        self._answer = "" if isinstance(event, ReplyTextReset) else event.text
        self._kick()

    def show_step(self, line: str) -> None:
        """The turn's current tool step, shown as a status line above the answer."""
        self._status = line
        self._kick()

    def _kick(self) -> None:
        if self._ended or self._broken or self._stopped():
            return
        if self._has_content_since is None and (self._answer or self._status):
            self._has_content_since = self._clock()
        self._wake.set()
        if not len(self._task):
            self._task.spawn(self._run(), name=f"stream:{self._chat}")

    # ending ---------------------------------------------------------------------------
    async def hand_over(self) -> SentMessage | None:
        """The answer follows: stop writing (a queued update is dropped, one in flight is
        waited for), seal a native stream; the edited message for the reply's first chunk
        (None in native mode, or when none was sent)."""
        if not await self._stop():
            return None
        await self._take_over_cut()
        if self._mode == "native":
            if self._shown is not None:
                await self._end_call("seal")
            return None
        return self._message

    async def clear(self) -> None:
        """The turn ended: remove what the stream shows (nothing once handed over: its
        answer was delivered); the stream's message is forgotten by the store either way."""
        if await self._stop():
            await self._take_over_cut()
            await self._remove()
        await self._forget()

    async def _remove(self) -> None:
        """Stopped or failed: the stream's text cleared, or its message deleted."""
        if self._mode == "native" and self._shown:
            await self._end_call("replace")
        elif self._mode == "edit" and self._message is not None:
            try:
                await self._outbound.perform(Delete(self._message))  # queued, not awaited
            except Exception as exc:
                logger.info("streamed answer in %s not removed: %s", self._chat, exc)

    # the message a crash may cut --------------------------------------------------------
    async def _take_over_cut(self) -> None:
        """Before anything is shown: the message a killed process's stream of this session
        left (the store's record) becomes this stream's, edited from now on."""
        if self._looked or self._store is None:
            return
        try:
            record = await self._store.stream_of(self._session_key)
        except StoreError as exc:
            logger.warning("stream of %s: no record read (%s)", self._session_key, exc)
            record = None
        self._looked = True  # (a read cut by a cancellation is made again)
        if record is None or self._message is not None:
            return
        self._recorded = record.message_id
        cut = SentMessage(ChatRef(record.platform, record.chat_id, record.thread_id),
                          record.message_id)  # fmt: skip
        if cut.chat != self._chat:
            await self._delete_cut(cut)
            return
        logger.info("stream of %s: takes over message %s a cut stream left",
                    self._session_key, cut.message_id)  # fmt: skip
        self._mode, self._shown, self.shows_progress = "edit", None, False
        self._message = self._cut = cut

    async def _delete_cut(self, cut: SentMessage) -> None:
        try:
            await self._outbound.perform(Delete(cut))
        except Exception as exc:
            logger.info("cut stream message %s not removed: %s", cut.message_id, exc)
        await self._forget()

    def _lost_cut(self, exc: AdapterError) -> bool:
        """An edit of the taken-over message failed: it is gone (deleted at a graceful
        shutdown, or by a person); the stream starts a message of its own."""
        if self._cut is None or self._message is not self._cut:
            return False
        logger.info("cut stream message %s not edited (%s); a new one is sent",
                    self._cut.message_id, exc)  # fmt: skip
        self._message = self._cut = None
        self._wake.set()
        return True

    async def _record(self, sent: SentMessage) -> None:
        """The stream now writes into ``sent``: the store keeps it until the stream ends."""
        if self._store is None or sent.message_id == self._recorded:
            return
        chat = sent.chat
        record = StreamRecord(
            self._session_key, chat.platform, chat.chat_id, chat.thread_id, sent.message_id
        )
        self._recorded = sent.message_id  # dropped at the end even if the stop cuts this off
        put = self._putting = asyncio.ensure_future(self._store.put_stream(record))
        try:
            await asyncio.shield(put)
        except StoreError as exc:
            logger.warning("stream of %s: message not recorded (%s)", self._session_key, exc)

    async def _forget(self) -> None:
        recorded, self._recorded = self._recorded, None
        if self._store is None or recorded is None:
            return
        put, self._putting = self._putting, None
        if put is not None:
            await asyncio.wait([put])  # its row is written before it is dropped
        try:
            await self._store.drop_stream(self._session_key, recorded)
        except StoreError as exc:
            logger.warning("stream of %s: record not dropped (%s)", self._session_key, exc)

    async def aclose(self) -> None:
        """Shutdown: stop writing at once."""
        self._ended = True
        await self._task.aclose()

    async def _stop(self) -> bool:
        """Stop the task; False when the stream was already ended."""
        if self._ended:
            return False
        self._ended = True
        self._wake.set()
        await self._task.aclose(self._finish_timeout if self._in_flight else 0.0)
        return True

    async def _end_call(self, mode: LiveMode) -> None:
        call = LiveText(self._chat, "", mode, priority=Priority.REPLY)
        try:
            async with asyncio.timeout(self._end_timeout):
                await self._outbound.perform(call)
        except Exception as exc:
            logger.info("streamed answer in %s not ended (%s): %s", self._chat, mode, exc)

    # the writing task -------------------------------------------------------------------
    def _stopped(self) -> bool:
        """The turn was asked to stop: the stream draws nothing more."""
        return self._token is not None and self._token.cancelled

    async def _run(self) -> None:
        await self._take_over_cut()
        while not (self._ended or self._broken or self._stopped()):
            await self._due()
            if self._ended or self._stopped():
                return
            await self._pace()
            if self._ended or self._stopped():
                return
            await self._write()

    async def _due(self) -> None:
        """Until new text arrived, or a live native stream must be refreshed."""
        keepalive = self._caps.stream_keepalive if self._mode == "native" else None
        if self._wake.is_set() or keepalive is None or not self._shown:
            await self._wake.wait()
            self._wake.clear()
            return
        woke = asyncio.ensure_future(self._wake.wait())
        timer = asyncio.ensure_future(self._sleep(self._last_write + keepalive - self._clock()))
        try:
            await asyncio.wait({woke, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woke.cancel()
            timer.cancel()
        self._wake.clear()
        self._refresh = self._refresh or (timer.done() and not timer.cancelled())

    async def _pace(self) -> None:
        """Until the next update may go out: ``stream_interval`` after the last one (edits:
        ``edit_interval`` too), and the first one ``first_update`` after there was
        something to show."""
        interval = self._caps.stream_interval
        if self._mode == "edit":
            interval = max(interval, self._caps.edit_interval)
        due = self._last_write + interval
        if self._has_content_since is not None:
            due = max(due, self._has_content_since + self._first_update)
        wait = due - self._clock()
        if wait > 0:
            await self._sleep(wait)

    async def _write(self) -> None:
        self._writing = None
        try:
            asked = self._call(PLACEHOLDER)  # where, how and what kind: the text is newest()'s
            sent = await self._outbound.perform(Latest(asked, self._newest))
        except StreamRefused as refused:
            self._to_edits(refused)
            return
        except NotModified:
            sent = None  # already shown: counts as written
        except RateLimited as exc:
            logger.info("streamed answer in %s: update skipped (%s)", self._chat, exc)
            return
        except AdapterError as exc:
            if isinstance(exc, MessageGone) and self._lost_cut(exc):
                return
            logger.warning("streamed answer in %s stopped: %s", self._chat, exc)
            self._broken = True
            return
        finally:
            self._in_flight = False
        if isinstance(sent, SentMessage):
            if self._mode == "edit":
                self._message = sent
            await self._record(sent)
        if self._writing is not None:
            self._shown, self._last_write = self._writing, self._clock()

    def _to_edits(self, refused: StreamRefused) -> None:
        """This chat cannot show a native stream: edits from now on (the text is re-sent)."""
        self._mode, self._shown, self.shows_progress = "edit", None, False
        if self._on_refused is not None:
            self._on_refused(self._chat, refused)
        self._wake.set()

    def _newest(self) -> Send | Edit | LiveText | None:
        """The update to make now the budget let it start (None: nothing new to show)."""
        if self._ended or self._stopped():
            return None
        text = self._text()
        if not text and self._mode == "edit":
            if self._message is None:
                return None
            text = PLACEHOLDER
        if not text and self._shown is None:
            return None
        if text == self._shown and not self._refresh:
            return None
        self._refresh = False
        self._in_flight, self._writing = True, text
        return self._call(text)

    def _text(self) -> str:
        """The status line (a tool step) above the answer so far, within the length limit."""
        text = "\n\n".join(part for part in (self._status, visible(self._answer)) if part)
        return _fit(text.rstrip(), self._caps.max_text_length, self._caps.length_unit)

    def _call(self, text: str) -> Send | Edit | LiveText:
        stream, key = Priority.STREAM, self._coalesce
        if self._mode == "native":
            return LiveText(self._chat, text, "replace", priority=stream, coalesce=key)
        if self._message is None:
            return Send(self._chat, text, markup=False, priority=stream, coalesce=key)
        return Edit(self._message, text, markup=False, priority=stream, coalesce=key)


def _fit(text: str, limit: int, unit: Literal["utf16", "codepoints", "bytes"]) -> str:
    """``text`` cut to the platform's message length (its end replaced by an ellipsis)."""
    if measure(text, unit) <= limit:
        return text
    cut = text[: max(limit - 1, 0)]
    while cut and measure(cut + PLACEHOLDER, unit) > limit:
        cut = cut[: len(cut) - max(1, len(cut) // 20)]
    return cut + PLACEHOLDER


class Streams:
    """The service's streamed answers: the live one per session, and the chats (of every
    bot, in memory) that refused a native stream and are shown answers by edits."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        first_update: float = FIRST_UPDATE_SECONDS,
        store: Store | None = None,
    ) -> None:
        self._clock, self._sleep = clock, sleep
        self._first_update = first_update
        self._store = store
        """Where each stream's message is recorded until it ends (None: nowhere)."""
        self._refused: BoundedMap[ChatRef, None] = BoundedMap(REMEMBERED_REFUSALS)
        self._live: dict[str, StreamedReply] = {}

    def open(
        self, session_key: str, place: Place, token: CancellationToken | None = None
    ) -> StreamedReply | None:
        """The turn's stream in ``place`` (None: the chat keeps the whole reply); once
        ``token`` (the turn's) is cancelled it draws nothing more."""
        caps = place.outbound.capabilities
        if caps.live_text or caps.streaming == "off":
            return None
        native = caps.streaming == "native" and place.chat not in self._refused
        if not native and not caps.supports_edit:
            return None
        stream = StreamedReply(
            place.outbound, place.chat, "native" if native else "edit",
            clock=self._clock, sleep=self._sleep, on_refused=self._refuse,
            first_update=self._first_update, token=token, session_key=session_key,
            store=self._store,
        )  # fmt: skip
        self._live[session_key] = stream
        return stream

    def take(self, session_key: str) -> StreamedReply | None:
        """The session's stream, no longer tracked (the turn ended)."""
        return self._live.pop(session_key, None)

    async def discard(self, session_key: str) -> None:
        """The turn raised: clear its stream."""
        stream = self.take(session_key)
        if stream is not None:
            await stream.clear()

    async def aclose(self) -> None:
        for stream in list(self._live.values()):
            await stream.aclose()
        self._live.clear()

    def _refuse(self, chat: ChatRef, refused: StreamRefused) -> None:
        if chat in self._refused:
            return
        self._refused.put(chat, None)
        logger.info("%s refused a native stream (%s): answers are edited in place", chat, refused)
