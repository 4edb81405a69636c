"""Sending text to a chat: the final reply of a turn, and short notices.

A reply is first redacted (:func:`core.redaction.redact`: secret shapes and the exact
configured secret values, so no chunk boundary can split a secret past the redactor), then
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
from functools import partial
from types import TracebackType

from adapters.base import Adapter, AdapterError, BadMarkup, ChatRef, RateLimited, SentMessage
from core.redaction import redact
from gateway.rate_limits import MAX_RETRY_AFTER, Sleep, with_rate_limits

logger = logging.getLogger(__name__)

DEFAULT_ATTEMPTS = 8
TYPING_INTERVAL = 4.0
MAX_CHUNKS = 20
"""Messages one reply may take, the truncation note included."""
TRUNCATED = "… (reply truncated: {count} more characters)"


class Delivery:
    def __init__(self, *, sleep: Sleep = asyncio.sleep, attempts: int = DEFAULT_ATTEMPTS) -> None:
        self._sleep = sleep
        self._attempts = attempts

    async def reply(self, adapter: Adapter, chat: ChatRef, markdown: str) -> list[SentMessage]:
        """Render, chunk and send a Markdown reply; returns the messages that arrived.

        At most ``MAX_CHUNKS`` messages: a longer reply ends with a note saying how many
        characters were left out."""
        renderer = adapter.capabilities.renderer
        caps = adapter.capabilities
        rendered = renderer.render(redact(markdown))
        chunks = renderer.chunk(rendered, caps.max_text_length, caps.length_unit)
        kept, dropped = _capped(chunks)
        sent: list[SentMessage] = []
        for chunk in kept:
            message = await self._send_chunk(adapter, chat, chunk, renderer.plain)
            if message is not None:
                sent.append(message)
        if dropped:
            left_out = sum(len(renderer.plain(chunk)) for chunk in dropped)
            logger.warning("reply to %s truncated: %d chunk(s) left out", chat, len(dropped))
            note = await self.notice(adapter, chat, TRUNCATED.format(count=left_out))
            sent += [note] if note is not None else []
        return sent

    async def notice(self, adapter: Adapter, chat: ChatRef, text: str) -> SentMessage | None:
        """Send a short plain-text notice ("⏹ Stopped.")."""
        return await self.send(adapter, chat, text, markup=False)

    async def send(
        self, adapter: Adapter, chat: ChatRef, text: str, *, markup: bool
    ) -> SentMessage | None:
        """One message with rate-limit retries; None (and an error log) if it never went."""
        try:
            return await self._send_marked(adapter, chat, text, markup=markup)
        except BadMarkup as exc:
            return _lost(chat, text, exc)

    async def _send_chunk(
        self, adapter: Adapter, chat: ChatRef, chunk: str, plain: Callable[[str], str]
    ) -> SentMessage | None:
        plain_only = adapter.capabilities.markup == "plain"
        try:
            return await self._send_marked(adapter, chat, chunk, markup=not plain_only)
        except BadMarkup as exc:
            logger.warning("markup rejected in %s (%s); sending as plain text", chat, exc)
            return await self.send(adapter, chat, plain(chunk), markup=False)

    async def _send_marked(
        self, adapter: Adapter, chat: ChatRef, text: str, *, markup: bool
    ) -> SentMessage | None:
        """Like :meth:`send`, but lets ``BadMarkup`` through for the plain fallback."""
        try:
            return await with_rate_limits(
                partial(adapter.send, chat, text, markup=markup),
                attempts=self._attempts, sleep=self._sleep, chat=chat, what="message",
            )  # fmt: skip
        except BadMarkup:
            raise
        except AdapterError as exc:  # RateLimited past the bounds included
            return _lost(chat, text, exc)


def _capped(chunks: list[str]) -> tuple[list[str], list[str]]:
    """The chunks to send and the ones left out (the note takes the last place)."""
    if len(chunks) <= MAX_CHUNKS:
        return chunks, []
    return chunks[: MAX_CHUNKS - 1], chunks[MAX_CHUNKS - 1 :]


def _lost(chat: ChatRef, text: str, why: object) -> SentMessage | None:
    logger.error("message to %s lost (%s): %d characters", chat, why, len(text))
    return None


class Typing:
    """``async with Typing(adapter, chat): ...`` shows "typing…" until the block ends."""

    def __init__(
        self,
        adapter: Adapter,
        chat: ChatRef,
        *,
        interval: float = TYPING_INTERVAL,
        sleep: Sleep = asyncio.sleep,
        paused: Callable[[], bool] = lambda: False,
    ) -> None:
        self._adapter, self._chat = adapter, chat
        self._interval, self._sleep = interval, sleep
        self._paused = paused
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Typing:
        self._task = asyncio.create_task(self._keep_typing(), name=f"typing:{self._chat}")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        await asyncio.wait({task})

    async def _keep_typing(self) -> None:
        while True:
            try:
                if not self._paused():
                    await self._adapter.typing(self._chat)
                await self._sleep(self._interval)
            except RateLimited as exc:
                await self._sleep(min(exc.retry_after, MAX_RETRY_AFTER))
            except Exception:
                logger.debug("typing indicator in %s failed; stopped", self._chat, exc_info=True)
                return
