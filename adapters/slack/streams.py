"""An answer streamed as a Slack chat stream (``chat.startStream`` / ``appendStream`` /
``stopStream``), and the message it leaves for the reply (docs/architecture.md,
"Streaming").

The gateway sends the whole answer so far, redacted, as ``LiveText(chat, text, "replace")``
(:mod:`gateway.turns.streaming`); Slack's stream only appends, so :meth:`SlackStreams.show`

* starts a stream in the chat's thread when there is none (``recipient_user_id`` /
  ``recipient_team_id``: the user who last wrote in that thread, which Slack requires
  outside DMs), with the text so far;
* appends only what is new when the text extends what was appended (pieces of at most
  12,000 characters, Slack's limit per call);
* when the text is not an extension (the redactor changed what was shown, or the text
  was a preamble to tool calls and was reset): stops that stream, deletes its message and
  starts a new one with the text; ``""`` only stops and deletes.

A stream is always a reply in a thread: a chat with no thread (a DM's top level, where the
adapter answers) is refused at once with :class:`~adapters.base.StreamRefused`, as is a
stream Slack will not start there (``missing_recipient_user_id``, ``not_in_channel``,
``user_not_found`` for a Slack Connect user, any error but a rate limit) or will not
append to or stop: the gateway then shows answers in that chat by edits. Before a refusal
the half-made stream is stopped and deleted (best effort), so nothing is shown twice.

``seal`` (the turn ended) stops the stream; the next reply chunk sent to that thread
(a ``Send`` carrying an outbox key, :meth:`SlackStreams.take_over`) becomes a
``chat.update`` of the stream's own message, with the chunk's metadata (so a crash-time
lookup finds it): the answer is one message, never a second ``chat.postMessage``. A stop
notice or another keyless ``Send`` is posted as usual and leaves the stream's message as it
is. A new stream, or a seal with no stream, forgets an unclaimed one.

A ``LiveText`` is answered with the stream's message (``ts``): the gateway records it
until the turn ends (:mod:`gateway.turns.streaming`). After a process was killed mid-stream the
stream stays live in Slack; the turn run again after the restart edits that message
(:func:`stop_cut` first stops it: Slack refuses to update a live stream), so the answer
replaces the cut stream in its own message.

The native Stop button of the thread's agent session (``agent_session_stopped``): Slack
stops the streams itself; :meth:`SlackStreams.stopped` answers which one of them is this
adapter's live stream (None: an old or unknown one) and marks it ended; its text stays
(Slack keeps a stopped stream: clearing it with ``""`` then only forgets it), and later
text for that turn is dropped. At shutdown a stream still live is stopped and deleted (its
turn runs again after the restart). An append
refused with ``message_not_in_streaming_state`` (Slack ended the stream) ends it alike.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import ChatRef, SentMessage, StreamRefused
from adapters.slack.errors import error_code, translate
from core.bounded import BoundedMap

_log = logging.getLogger(__name__)

MAX_MARKDOWN = 12_000
"""Characters of ``markdown_text`` per stream call."""
ENDED = "message_not_in_streaming_state"
REMEMBERED = 10_000
CLOSE_SECONDS = 2.0

Thread = tuple[str, str]
ClearStatus = Callable[[ChatRef], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Asker:
    """Who last wrote in a thread: the recipient a stream there is for."""

    user: str
    team: str


@dataclass(slots=True)
class Stream:
    chat: ChatRef
    ts: str
    shown: str
    live: bool = True
    """False once Slack ended it (the Stop button, or it stopped streaming)."""


class SlackStreams:
    """The chat streams of one bot, one per thread at most."""

    def __init__(self, client: AsyncWebClient, clear_status: ClearStatus) -> None:
        self._client, self._clear_status = client, clear_status
        self._streams: dict[Thread, Stream] = {}
        self._sealed: BoundedMap[Thread, str] = BoundedMap(REMEMBERED)
        self._askers: BoundedMap[Thread, Asker] = BoundedMap(REMEMBERED)
        self._started = asyncio.Condition()

    def asked(self, chat: ChatRef, user: str, team: str) -> None:
        """A user wrote in ``chat``: a stream there is for them."""
        if chat.thread_id is not None and user:
            self._askers.put((chat.chat_id, chat.thread_id), Asker(user, team))

    # showing ------------------------------------------------------------------------------
    async def show(self, chat: ChatRef, text: str) -> SentMessage | None:
        """Make the thread's stream show ``text`` (see the module); the stream's message
        (None when none is live), which the gateway records until the turn ends."""
        thread = _thread(chat)
        self._sealed.pop(thread, None)
        stream = self._streams.get(thread)
        if stream is not None and not stream.live:
            if not text:  # the turn ended (stopped): Slack keeps what it showed
                self._streams.pop(thread, None)
            return None  # else Slack ended it: the reply takes its place when the turn ends
        if stream is not None and text.startswith(stream.shown):
            await self._append(stream, text[len(stream.shown) :])
            return _message(stream)
        if stream is not None:
            await self._discard(thread, stream)
        if text:
            return _message(await self._start(chat, thread, text))
        return None

    async def _start(self, chat: ChatRef, thread: Thread, text: str) -> Stream:
        first, rest = text[:MAX_MARKDOWN], text[MAX_MARKDOWN:]
        asker = self._askers.get(thread)
        await self._clear_status(chat)
        with _refusals("start"):
            response = await self._client.chat_startStream(
                channel=chat.chat_id,
                thread_ts=thread[1],
                markdown_text=first,
                recipient_user_id=None if asker is None else asker.user,
                recipient_team_id=None if asker is None else asker.team,
            )
        stream = Stream(chat, str(response["ts"]), first)
        self._streams[thread] = stream
        async with self._started:
            self._started.notify_all()
        await self._append(stream, rest)
        return stream

    async def _append(self, stream: Stream, new: str) -> None:
        for piece in _pieces(new):
            try:
                with _refusals("append"):
                    await self._client.chat_appendStream(
                        channel=stream.chat.chat_id, ts=stream.ts, markdown_text=piece
                    )
            except _Ended:
                stream.live = False
                return
            except StreamRefused:
                await self._discard(_thread(stream.chat), stream)
                raise
            stream.shown += piece

    async def _discard(self, thread: Thread, stream: Stream) -> None:
        """Stop ``stream`` (when live) and delete its message, best effort; forget it."""
        self._streams.pop(thread, None)
        channel = stream.chat.chat_id
        try:
            if stream.live:
                await self._client.chat_stopStream(channel=channel, ts=stream.ts)
        except SlackClientError as exc:
            _log.debug("slack: stream %s not stopped: %s", stream.ts, exc)
        try:
            await self._client.chat_delete(channel=channel, ts=stream.ts)
        except SlackClientError as exc:
            _log.debug("slack: stream %s not deleted: %s", stream.ts, exc)

    # the end of a turn --------------------------------------------------------------------
    async def seal(self, chat: ChatRef) -> None:
        """The turn ended: stop its stream; the next reply chunk takes the message over."""
        if chat.thread_id is None:
            return
        thread = _thread(chat)
        self._sealed.pop(thread, None)
        stream = self._streams.get(thread)
        if stream is None:
            return
        if stream.live:
            try:
                with _refusals("stop"):
                    await self._client.chat_stopStream(channel=chat.chat_id, ts=stream.ts)
            except _Ended:
                pass
            except StreamRefused:
                await self._discard(thread, stream)
                raise
        self._streams.pop(thread, None)
        self._sealed.put(thread, stream.ts)

    def sealed(self, chat: ChatRef) -> str | None:
        """The ts of the sealed stream message a reply chunk to ``chat`` takes over."""
        return None if chat.thread_id is None else self._sealed.get(_thread(chat))

    def taken(self, chat: ChatRef) -> None:
        """The reply took the sealed message over (or it is gone): forget it."""
        if chat.thread_id is not None:
            self._sealed.pop(_thread(chat), None)

    # the Stop button ----------------------------------------------------------------------
    def stopped(self, channel: str, thread_ts: str, stopped: list[str]) -> Stream | None:
        """Slack stopped the streams ``stopped`` of a thread: this adapter's live one among
        them (marked ended), or None."""
        stream = self._streams.get((channel, thread_ts))
        if stream is None or not stream.live or stream.ts not in stopped:
            return None
        stream.live = False
        return stream

    async def aclose(self) -> None:
        """Shutdown: the streams still live are stopped and removed (best effort, at most
        :data:`CLOSE_SECONDS`): their turns run again after the restart, streaming anew."""
        live = [(thread, s) for thread, s in self._streams.items() if s.live]
        try:
            async with asyncio.timeout(CLOSE_SECONDS):
                for thread, stream in live:
                    await self._discard(thread, stream)
        except TimeoutError:
            _log.info("slack: %d stream(s) not removed at shutdown", len(self._streams))
        self._streams.clear()

    def shown(self, chat: ChatRef) -> str:
        """What the thread's live stream shows ("" when none)."""
        stream = None if chat.thread_id is None else self._streams.get(_thread(chat))
        return stream.shown if stream is not None and stream.live else ""

    def writes(self, message: SentMessage) -> bool:
        """Is ``message`` this adapter's live stream?"""
        stream = self._streams.get(_thread(message.chat)) if message.chat.thread_id else None
        return stream is not None and stream.live and stream.ts == message.message_id

    def live(self, chat: ChatRef) -> bool:
        """Is a stream live in ``chat`` (tests and logs)?"""
        stream = None if chat.thread_id is None else self._streams.get(_thread(chat))
        return stream is not None and stream.live

    async def wait_live(self, chat: ChatRef) -> None:
        """Until a stream is live in ``chat`` (Slack answered its ``chat.startStream``)."""
        async with self._started:
            await self._started.wait_for(lambda: self.live(chat))


class _Ended(Exception):
    """Slack answered ``message_not_in_streaming_state``: the stream ended already."""


@contextmanager
def _refusals(what: str) -> Iterator[None]:
    """Slack's answer to a stream call as the adapter's: a rate limit or a broken
    connection as :func:`adapters.slack.errors.translate` says, the stream already ended as
    :class:`_Ended`, anything else Slack refused as :class:`StreamRefused`."""
    try:
        yield
    except SlackApiError as exc:
        code = error_code(exc)
        if exc.response.status_code == 429 or code == "ratelimited":
            raise translate(exc) from exc
        if code == ENDED:
            raise _Ended(code) from exc
        raise StreamRefused(f"slack: stream {what} refused ({code or 'no code'})") from exc
    except SlackClientError as exc:
        raise translate(exc) from exc


def _message(stream: Stream) -> SentMessage | None:
    return SentMessage(stream.chat, stream.ts) if stream.live else None


async def stop_cut(client: AsyncWebClient, message: SentMessage) -> None:
    """``message`` is a stream still live that no process of this bot writes (a process
    killed while it streamed): stop it, so it can be updated (``chat.update`` refuses a
    live stream with ``cant_update_message``). One that ended already is no error."""
    try:
        with _refusals("stop"):
            await client.chat_stopStream(channel=message.chat.chat_id, ts=message.message_id)
    except _Ended:
        pass


def _thread(chat: ChatRef) -> Thread:
    if chat.thread_id is None:
        raise StreamRefused("slack: a stream is a thread reply; this chat's answers are not")
    return chat.chat_id, chat.thread_id


def _pieces(text: str) -> Iterator[str]:
    for at in range(0, len(text), MAX_MARKDOWN):
        yield text[at : at + MAX_MARKDOWN]
