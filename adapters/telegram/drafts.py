"""A streamed answer as a Telegram message draft (``sendMessageDraft``), and its Stop button.

The gateway streams an answer as ``LiveText`` calls (docs/architecture.md, "Streaming"):

    replace  the draft shows ``text`` (plain, the newest text whole: at most 4096 UTF-16
             units, the start cut off with "…" beyond): ``sendMessageDraft(chat_id,
             draft_id, text, message_thread_id, can_stop=true, keep_on_stop=true)``; the
             first one of a stream draws a new draft (a new ``draft_id``). "" makes no call
             (the gateway charges none for it): a draft cannot be removed, so it shows its
             last text until the next text draws it again (the text so far was a preamble to
             tool calls) or a message ends it (the turn ended without an answer: its notice
             or its error), and its Stop stays usable meanwhile
    append   the same with ``text`` added to what the draft shows
    seal     the stream is over: the next ``Send`` is the answer as a real message, which
             makes Telegram drop the draft — the draft itself is never sent as a message
             (that would be a duplicate)

Any real message the bot sends into the chat (topic) dismisses its draft on Telegram
(:meth:`DraftStreams.message_sent`). A draft with text keeps its ``draft_id`` for the rest
of its stream — the next text or keepalive draws it again (after an approval card, say), and
a Stop pressed just before the message still counts —; an empty or stopped one ends there
(the turn is over: the message was its notice or its error), so the next turn draws a new
draft.

Drafts exist only in private chats (and their topics): a group, supergroup or channel
(a negative chat id) raises :class:`StreamRefused` at once, without a call, and so does any
error Telegram answers a draft with (``TEXTDRAFT_PEER_INVALID``, a bad request, a blocked
bot): the gateway shows answers in that chat by edits from then on. Flood control (429)
stays :class:`RateLimited` (the scheduler waits it out) and a network failure an
``AdapterError``.

``can_stop`` (Bot API 10.3, passed as ``api_kwargs``: PTB 22.8 does not type it) gives the
draft a Stop button — which also keeps Telegram Android's Send button usable while the draft
is live. A press comes back as the ``stopped_message_generation`` update
``{chat, message_thread_id, draft_id}``; :meth:`DraftStreams.stop` says whether it is for
the chat's live draft (then the adapter hands the gateway a ``stop`` event, once). A stop
for a draft whose stream ended — or of an earlier run: the streams live in memory only, so
a replayed stop finds none — changes nothing. ``keep_on_stop`` makes Telegram keep the
stopped draft as a message: the partial answer stays in the chat.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass

from telegram import Bot
from telegram import error as tg

from adapters.base import ChatRef, StreamRefused
from adapters.calls import LiveText
from adapters.telegram.errors import translate

MAX_DRAFT_UTF16 = 4096
ELLIPSIS = "…"
DRAFT_OPTIONS = {"can_stop": True, "keep_on_stop": True}
"""Bot API 10.3's draft options, sent as ``api_kwargs``."""
StreamKey = tuple[str, str | None]
"""A chat and the topic in it."""


@dataclass(slots=True)
class Draft:
    """The live draft of one chat (topic)."""

    draft_id: int
    text: str = ""
    stopped: bool = False
    """The user pressed its Stop: nothing more is drawn until the stream ends."""


def draft_ids() -> Iterator[int]:
    """Draft ids for one run: counting up from a random start, so an id of an earlier run
    (a stop Telegram still delivers) is not taken for one of this run's."""
    return itertools.count(random.randint(1, 2**31))


def fit(text: str) -> str:
    """``text`` within a draft's 4096 UTF-16 units: the newest part, "…" before it."""
    if _utf16(text) <= MAX_DRAFT_UTF16:
        return text
    keep = MAX_DRAFT_UTF16 - _utf16(ELLIPSIS)
    tail = text.encode("utf-16-le")[-2 * keep :].decode("utf-16-le", errors="ignore")
    return ELLIPSIS + tail


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def is_private(chat: ChatRef) -> bool:
    """A private chat: Telegram gives users positive ids, groups and channels negative."""
    return not chat.chat_id.startswith("-")


class DraftStreams:
    """The live drafts of one bot, per chat (topic), in memory."""

    def __init__(self, bot: Bot, ids: Iterator[int] | None = None) -> None:
        self.bot = bot
        self._ids = ids or draft_ids()
        self._live: dict[StreamKey, Draft] = {}

    async def perform(self, call: LiveText) -> None:
        """One ``LiveText`` call (the module docstring)."""
        key = (call.chat.chat_id, call.chat.thread_id)
        if call.mode == "seal":
            self._live.pop(key, None)
            return
        if call.mode == "replace" and not call.text:
            self._clear(key)
            return
        if not is_private(call.chat):
            raise StreamRefused(f"telegram chat {call.chat.chat_id}: drafts are for private chats")
        draft = self._live.get(key) or Draft(next(self._ids))
        text = call.text if call.mode == "replace" else draft.text + call.text
        if draft.stopped:
            return
        await self._draw(call.chat, draft.draft_id, text)
        draft.text = text
        self._live[key] = draft

    def _clear(self, key: StreamKey) -> None:
        """The stream's text is gone (a preamble reset, or the turn ended without an
        answer): no call — a draft cannot be removed; its Stop stays usable until the next
        text draws it again or a message ends it (:meth:`message_sent`)."""
        draft = self._live.get(key)
        if draft is not None:
            draft.text = ""

    async def _draw(self, chat: ChatRef, draft_id: int, text: str) -> None:
        try:
            await self._send(chat, draft_id, text)
        except (tg.BadRequest, tg.Forbidden) as exc:  # TEXTDRAFT_PEER_INVALID, blocked, ...
            raise StreamRefused(f"telegram chat {chat.chat_id}: {exc.message}") from exc
        except tg.TelegramError as exc:  # flood control, the network
            raise translate(exc) from exc

    async def _send(self, chat: ChatRef, draft_id: int, text: str) -> None:
        thread = int(chat.thread_id) if chat.thread_id is not None else None
        await self.bot.send_message_draft(
            int(chat.chat_id),
            draft_id,
            fit(text),
            message_thread_id=thread,
            api_kwargs=dict(DRAFT_OPTIONS),
        )

    def message_sent(self, chat: ChatRef) -> None:
        """A real message goes into ``chat``: Telegram drops its draft; an empty or stopped
        one ends its stream (the module docstring)."""
        key = (chat.chat_id, chat.thread_id)
        draft = self._live.get(key)
        if draft is not None and (draft.stopped or not draft.text):
            del self._live[key]

    def stop(self, chat: ChatRef, draft_id: int) -> bool:
        """The user pressed Stop on draft ``draft_id``: True (once) when it is the chat's
        live draft — its stream then draws nothing more until it ends."""
        draft = self._live.get((chat.chat_id, chat.thread_id))
        if draft is None or draft.draft_id != draft_id or draft.stopped:
            return False
        draft.stopped = True
        return True

    def live(self, chat: ChatRef) -> int | None:
        """The draft id of the chat's live stream (None: none)."""
        draft = self._live.get((chat.chat_id, chat.thread_id))
        return draft.draft_id if draft is not None else None
