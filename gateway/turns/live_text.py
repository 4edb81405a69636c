"""A streaming reply's text, live in the chats that can show it (``docs/turn-loop.md`` §16).

A platform that can show text as it arrives declares ``Capabilities.live_text``; the
text goes out as an ordinary call through the bot's pipeline (:mod:`gateway.outbound.pipeline`)::

    await outbound.perform(LiveText(chat, text, mode))

    append   add ``text`` to the chat's live reply (start one if there is none)
    replace  the live reply becomes ``text`` ("" removes it)
    seal     the turn ended: the next reply sent to the chat (a ``Send``/``Edit``
             with markup) takes the live reply's place; a live reply never replaced is
             removed once the chat has nothing left running

Per turn, :func:`live_reply` gives the engine's ``on_text`` listener (:class:`LiveReply`)
for the turn's chat, or ``None`` when the chat cannot show live text (the web chat can;
the rate-limited platforms stream answers through :mod:`gateway.turns.streaming` instead,
docs/architecture.md §13). The final reply is still delivered once, by
:mod:`gateway.outbound.delivery`; the live text is display only.

What is shown is redacted like every text sent to a chat (:func:`core.redaction.redact`),
and only up to the last whitespace: a secret is shown whole or not at all, never a prefix
too short for the redactor to recognise. When redacting the longer text changes what was
already shown, the live reply is replaced instead of appended to. Updates are paced to
one per :data:`LIVE_TEXT_INTERVAL` (longer for a long text, :data:`REDACT_SHARE`); the
engine coalesces the text that arrives meanwhile.
Live text is scheduled at ``PROGRESS`` like a progress state; a platform with rate limits
should not declare it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from adapters.base import ChatRef
from adapters.calls import LiveMode, LiveText
from core.agent.step import ReplyTextReset, TextEvent
from core.redaction import redact
from gateway.outbound.directory import Place
from gateway.outbound.pipeline import Outbound

logger = logging.getLogger(__name__)

LIVE_TEXT_INTERVAL = 0.05
"""Seconds between two live-text updates of one turn."""
REDACT_SHARE = 4.0
"""A long reply is redacted whole on each update: the pause after it is at least this many
times what the redaction took, so it never takes more than a fifth of the loop."""
MAX_PAUSE = 0.5
"""The longest pause: within the engine's time box for one listener call."""
END_SECONDS = 1.0
"""Time box for sealing or clearing the live reply when the turn ends."""


class LiveReply:
    """The engine's ``on_text`` for one turn in one chat."""

    def __init__(
        self, outbound: Outbound, chat: ChatRef, *, pace: float = LIVE_TEXT_INTERVAL
    ) -> None:
        self._outbound = outbound
        self._chat = chat
        self._pace = pace
        self._shown = ""

    async def __call__(self, event: TextEvent) -> None:
        if isinstance(event, ReplyTextReset):
            await self._show("")
            return
        started = time.perf_counter()
        shown = visible(event.text)
        spent = time.perf_counter() - started
        await self._show(shown)
        await asyncio.sleep(min(max(self._pace, REDACT_SHARE * spent), MAX_PAUSE))

    async def end(self, completed: bool) -> None:
        """The turn ended: seal what is shown (the reply replaces it), or clear it."""
        try:
            async with asyncio.timeout(END_SECONDS):
                if completed:
                    await self._live("", "seal")
                else:
                    await self._show("")
        except Exception as exc:
            logger.info("live reply in %s not ended: %s", self._chat, exc)

    async def _show(self, text: str) -> None:
        shown = self._shown
        if text == shown:
            return
        self._shown = text
        if shown and text.startswith(shown):
            await self._live(text[len(shown) :], "append")
        else:
            await self._live(text, "replace")

    async def _live(self, text: str, mode: LiveMode) -> None:
        await self._outbound.perform(LiveText(self._chat, text, mode))


def visible(text: str) -> str:
    """What a chat may be shown of a reply still being written: redacted, up to its last
    whitespace (a secret is shown whole or not at all). Streamed answers use it too
    (:mod:`gateway.turns.streaming`)."""
    return redact(whole_words(text))


def whole_words(text: str) -> str:
    """``text`` up to its last whitespace (a word still arriving is held back)."""
    for index in range(len(text) - 1, -1, -1):
        if text[index].isspace():
            return text[: index + 1]
    return ""


@asynccontextmanager
async def live_reply(place: Place) -> AsyncIterator[LiveReply | None]:
    """The turn's ``on_text`` (None: the chat keeps the whole reply). On the way out the
    live reply is sealed for the reply to replace, or cleared when the turn raised."""
    if not place.outbound.capabilities.live_text:
        yield None
        return
    live = LiveReply(place.outbound, place.chat)
    completed = False
    try:
        yield live
        completed = True
    finally:
        await live.end(completed)
