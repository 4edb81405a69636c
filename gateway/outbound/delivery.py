"""Sending text to a chat: the final reply of a turn, and short notices.

A reply is first redacted (:func:`core.redaction.redact`: the exact configured secret
values and nothing else, so no chunk boundary can split a secret past the redactor), then
rendered for the adapter's markup dialect, chunked to its length limit
(counted in its unit), and each chunk is sent with:

* ``BadMarkup`` → that chunk is resent as plain text (the markup stripped), once;
* ``RateLimited`` → wait ``retry_after`` and try again, at most ``attempts`` times, as long
  as the platform asks for at most ``MAX_RETRY_AFTER`` seconds (a generous bound: a
  flood-controlled reply is late, never silently dropped);
* anything else, or attempts used up → one error log line naming the chat; the remaining
  chunks are still tried (a lost middle chunk is logged, never silent);
* more than ``MAX_CHUNKS`` chunks → the first ones, then a note "… (reply truncated: N
  more characters)".

**The outbox.** Given a store and the turn's id, the chunks are stored (turn id + chunk
index) before the first is sent; each is marked started just before its send and with the
platform's message id once it arrived. Delivering the same turn again (a replayed update
whose answer is stored, after a crash or a restart) sends only the chunks not marked, with
the texts stored the first time. Every send carries the chunk's key, and one that was in
flight at the crash (started, not marked) also when that send began, so the platform can
show it once: Discord's nonce, Slack's metadata lookup, the web feed's chunk ids; Telegram
has no key and sends it again (at most one duplicate per turn, since the chunks go one
after another; docs/architecture.md, "Exactly once"). A store that cannot write does not
stop the reply: it is sent without the outbox (logged). The chunks this process sent are
also remembered in memory (the last ``SENT_REMEMBERED``, with their texts' hashes): a
delivery of the same turn again — its update replayed because the store could not mark it
done during an outage — sends none of them twice, and marks in the outbox those whose mark
the outage refused. Only the same text counts: a turn the outage cut short was answered
with its failure notice, and the answer its replay delivers is sent in full.

**Into the progress message.** ``reply(..., into=message)`` edits that message (the turn's
progress, handed over) into the first chunk instead of sending it — one call instead of
two; if the edit fails (the message is gone) the chunk is sent as a new message.

Everything goes out as call values through the bot's pipeline (:mod:`gateway.outbound.pipeline`):
replies at ``REPLY`` priority, each stored chunk's ``Send`` carrying the chunk's id as its
``key`` (a platform with an idempotency mechanism shows a chunk sent twice once); notices
at ``URGENT``; typing at ``CLEANUP``.

``Typing`` keeps the platform's typing indicator alive while a turn runs: one tracked task
per turn, refreshed every ``interval`` seconds, stopped (and awaited) when the turn ends.
While ``paused()`` answers True no indicator is sent (the service pauses it while an
approval card waits, and in group chats once a progress message shows the turn is alive:
Telegram counts chat actions against a group's 20 messages a minute).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import replace
from functools import partial

from adapters import calls
from adapters.base import AdapterError, BadMarkup, ChatRef, NotModified, RateLimited, SentMessage
from adapters.calls import Edit, Priority, Send
from core.bounded import BoundedMap
from core.redaction import redact
from core.store.base import OutboxChunk, Store, StoreError
from gateway.outbound.pipeline import Outbound
from gateway.outbound.rate_limits import MAX_ATTEMPTS, MAX_RETRY_AFTER, Sleep, with_rate_limits

logger = logging.getLogger(__name__)

TYPING_INTERVAL = 4.0
TYPING_DELAY = 1.0
"""A turn that answers within this many seconds shows no "typing…" (one call saved)."""
MAX_CHUNKS = 20
"""Messages one reply may take, the truncation note included."""
TRUNCATED = "… (reply truncated: {count} more characters)"
SENT_REMEMBERED = 10_000
"""Sent chunks (turn id, index, text hash) remembered in memory, beside the outbox."""


class Delivery:
    def __init__(
        self,
        *,
        sleep: Sleep = asyncio.sleep,
        attempts: int = MAX_ATTEMPTS,
        store: Store | None = None,
    ) -> None:
        self._sleep = sleep
        self._attempts = attempts
        self._store = store
        self._sent: BoundedMap[tuple[str, int, int], str] = BoundedMap(SENT_REMEMBERED)

    async def reply(
        self,
        outbound: Outbound,
        chat: ChatRef,
        markdown: str,
        *,
        turn_id: str | None = None,
        into: SentMessage | None = None,
    ) -> list[SentMessage]:
        """Render, chunk and send a Markdown reply; returns the messages that arrived
        (chunks an earlier delivery of ``turn_id`` already sent are not sent again).

        At most ``MAX_CHUNKS`` messages: a longer reply ends with a note saying how many
        characters were left out."""
        planned = self._plan(outbound, chat, markdown, turn_id or "")
        chunks = await self._stored(planned) if turn_id else planned
        plain = outbound.capabilities.renderer.plain
        sent: list[SentMessage] = []
        for chunk in chunks:
            if chunk.message_id is None and _sent_key(chunk) in self._sent:
                chunk = await self._known(chunk)
            if chunk.message_id is not None:
                continue  # sent by an earlier delivery of this turn
            target = into if chunk.index == 0 else None
            message = await self._send_chunk(outbound, chat, chunk, plain, target)
            if message is not None:
                sent.append(message)
                await self._mark(chunk, message, turn_id)
        return sent

    async def _started(self, chunk: OutboxChunk) -> None:
        """Mark the chunk's send as begun, just before the call (a crash from here until
        the sent mark leaves it in flight: the next delivery says so with the send)."""
        if self._store is None or not chunk.turn_id:
            return
        try:
            await self._store.mark_outbox_started(chunk.turn_id, chunk.index)
        except StoreError as exc:
            turn, index = chunk.turn_id, chunk.index
            logger.error("turn %s: chunk %d not marked started (%s)", turn, index, exc)

    def _plan(
        self, outbound: Outbound, chat: ChatRef, markdown: str, turn_id: str
    ) -> list[OutboxChunk]:
        renderer, caps = outbound.capabilities.renderer, outbound.capabilities
        rendered = renderer.render(redact(markdown))
        chunks = renderer.chunk(rendered, caps.max_text_length, caps.length_unit)
        kept, dropped = _capped(chunks) if len(chunks) > MAX_CHUNKS else (chunks, [])
        markup = caps.markup != "plain"
        where = (chat.platform, chat.chat_id, chat.thread_id)
        planned = [OutboxChunk(turn_id, i, *where, text, markup) for i, text in enumerate(kept)]
        if dropped:
            left_out = sum(len(renderer.plain(chunk)) for chunk in dropped)
            logger.warning("reply to %s truncated: %d chunk(s) left out", chat, len(dropped))
            note = TRUNCATED.format(count=left_out)
            planned.append(OutboxChunk(turn_id, len(kept), *where, note, False))
        return planned

    async def _stored(self, planned: list[OutboxChunk]) -> list[OutboxChunk]:
        """The turn's chunks as stored (an earlier delivery's win); unstored on failure."""
        if self._store is None:
            return planned
        try:
            return await self._store.put_outbox(planned) or planned
        except StoreError as exc:
            logger.error("turn %s: reply not stored in the outbox (%s)", planned[0].turn_id, exc)
            return planned

    async def _known(self, chunk: OutboxChunk) -> OutboxChunk:
        """``chunk``, marked sent when this process sent it already (its mark is stored
        now if the store had refused it); asked only of a chunk :attr:`_sent` holds."""
        message_id = self._sent.get(_sent_key(chunk)) if chunk.turn_id else None
        if chunk.message_id is not None or message_id is None:
            return chunk
        message = SentMessage(ChatRef(chunk.platform, chunk.chat_id, chunk.thread_id), message_id)
        await self._mark(chunk, message, chunk.turn_id)
        return replace(chunk, message_id=message_id)

    async def _mark(self, chunk: OutboxChunk, message: SentMessage, turn_id: str | None) -> None:
        if turn_id:
            self._sent.put(_sent_key(chunk), message.message_id)
        if self._store is None or not turn_id:
            return
        try:
            await self._store.mark_outbox_sent(turn_id, chunk.index, message.message_id)
        except StoreError as exc:
            logger.error("turn %s: chunk %d sent but not marked (%s)", turn_id, chunk.index, exc)

    async def notice(
        self, outbound: Outbound, chat: ChatRef, text: str, *, priority: Priority = Priority.URGENT
    ) -> SentMessage | None:
        """Send a short plain-text notice ("⏹ Stopped.")."""
        return await self.send(outbound, Send(chat, text, markup=False, priority=priority))

    async def send(self, outbound: Outbound, call: Send) -> SentMessage | None:
        """One message with rate-limit retries; None (and an error log) if it never went."""
        try:
            return await self._send_marked(outbound, call)
        except BadMarkup as exc:
            return _lost(call.chat, call.text, exc)

    async def _send_chunk(
        self,
        outbound: Outbound,
        chat: ChatRef,
        chunk: OutboxChunk,
        plain: Callable[[str], str],
        into: SentMessage | None,
    ) -> SentMessage | None:
        if into is not None:
            edited = await self._edit_into(outbound, into, chunk, plain)
            if edited is not None:
                return edited
        key = _call_key(chunk)
        since = chunk.started_at  # set: a send of this unsent chunk began (it is in flight)
        await self._started(chunk)
        call = Send(
            chat, chunk.text, markup=chunk.markup, key=key, in_flight_since=since,
            priority=Priority.REPLY,
        )  # fmt: skip
        try:
            return await self._send_marked(outbound, call)
        except BadMarkup as exc:
            logger.warning("markup rejected in %s (%s); sending as plain text", chat, exc)
        return await self.send(outbound, replace(call, text=plain(chunk.text), markup=False))

    async def _edit_into(
        self,
        outbound: Outbound,
        message: SentMessage,
        chunk: OutboxChunk,
        plain: Callable[[str], str],
    ) -> SentMessage | None:
        """``message`` edited into ``chunk`` (its buttons removed); None when it could not
        be (the chunk is then sent as a new message)."""
        text, markup = chunk.text, chunk.markup
        for attempt in ("marked", "plain"):
            try:
                await outbound.perform(Edit(message, text, markup=markup))
                return message
            except NotModified:
                return message
            except BadMarkup as exc:
                if attempt == "plain":
                    break
                logger.warning("markup rejected in %s (%s); editing as plain", message.chat, exc)
                text, markup = plain(chunk.text), False
            except AdapterError as exc:
                logger.info("progress in %s not edited into the reply (%s)", message.chat, exc)
                break
        return None

    async def _send_marked(self, outbound: Outbound, call: Send) -> SentMessage | None:
        """Like :meth:`send`, but lets ``BadMarkup`` through for the plain fallback. A
        bot's scheduler is its one retry layer (:mod:`gateway.outbound.rate_limits`): only a
        bot without one (a bare adapter in a test) is retried here."""
        try:
            if outbound.scheduler is not None:
                return await outbound.perform(call)
            return await with_rate_limits(
                partial(outbound.perform, call),
                attempts=self._attempts, sleep=self._sleep, chat=call.chat, what="message",
            )  # fmt: skip
        except BadMarkup:
            raise
        except AdapterError as exc:  # RateLimited past the bounds included
            return _lost(call.chat, call.text, exc)


def _capped(chunks: list[str]) -> tuple[list[str], list[str]]:
    """The chunks to send and the ones left out (the note takes the last place)."""
    if len(chunks) <= MAX_CHUNKS:
        return chunks, []
    return chunks[: MAX_CHUNKS - 1], chunks[MAX_CHUNKS - 1 :]


LOST_SENDS: ContextVar[list[str] | None] = ContextVar("lost_sends", default=None)
"""Set by a caller that must know: the reason of each message the platform refused (a
scheduled turn's delivery status, :mod:`gateway.schedule.runner`)."""


def _lost(chat: ChatRef, text: str, why: object) -> SentMessage | None:
    logger.error("message to %s lost (%s): %d characters", chat, why, len(text))
    lost = LOST_SENDS.get()
    if lost is not None:
        lost.append(str(why))
    return None


class Typing:
    """``async with Typing(outbound, chat): ...`` shows "typing…" until the block ends (from
    ``delay`` seconds on)."""

    def __init__(
        self,
        outbound: Outbound,
        chat: ChatRef,
        *,
        interval: float = TYPING_INTERVAL,
        sleep: Sleep = asyncio.sleep,
        paused: Callable[[], bool] = lambda: False,
        delay: float = 0.0,
    ) -> None:
        self._outbound, self._chat = outbound, chat
        self._delay = delay
        self._interval, self._sleep = interval, sleep
        self._paused = paused
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Typing:
        self._task = asyncio.create_task(self._keep_typing(), name=f"typing:{self._chat}")
        return self

    async def aclose(self, *_exc: object) -> None:
        """Stop the indicator (and wait for its task); also the block's end."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        await asyncio.wait({task})

    __aexit__ = aclose

    async def _keep_typing(self) -> None:
        if self._delay > 0:
            await self._sleep(self._delay)
        while True:
            try:
                if not self._paused():
                    await self._outbound.perform(calls.Typing(self._chat))
                await self._sleep(self._interval)
            except RateLimited as exc:
                await self._sleep(min(exc.retry_after, MAX_RETRY_AFTER))
            except Exception:
                logger.debug("typing indicator in %s failed; stopped", self._chat, exc_info=True)
                return


def _call_key(chunk: OutboxChunk) -> str | None:
    """The idempotency key the chunk's sends carry, stable across restarts: its
    :func:`core.store.records.chunk_key` (built here without the call); none for a reply
    that is not a turn's."""
    return f"{chunk.turn_id}.{chunk.index}" if chunk.turn_id else None


def _sent_key(chunk: OutboxChunk) -> tuple[str, int, int]:
    """What a sent chunk is remembered by: its turn, its place and its text."""
    return chunk.turn_id, chunk.index, hash(chunk.text)
