"""The Telegram adapter: python-telegram-bot driven by hand inside our event loop.

Lifecycle: ``start`` initialises the bot (``getMe``), publishes the command menu
(``setMyCommands``), replays updates a previous run left unfinished, then receives by long
polling (default) or webhook. ``stop`` cancels receiving and deliveries in flight and shuts
the bot down. ``run_polling()`` and PTB's ``Updater`` are never used: see ``polling.py``.

Health (``adapter.health``, docs/architecture.md §10): ``up`` once receiving; the poller
makes it ``retrying`` while ``getUpdates`` fails and ``up`` again when it answers; a token
Telegram rejects (401/404 from ``getMe`` at start or ``getUpdates`` later) makes it
``down`` with the fix, logged once — ``start`` then returns without receiving.

Outbound calls are made once: PTB's rate limiter is not used, so a 429 is raised at once as
``RateLimited(retry_after)`` (with the rest of the adapter error tree, ``errors.py``). The
gateway's outbound scheduler paces every call to the limits declared in ``capabilities``
(about 30 calls a second per bot, one a second per chat with short bursts, 20 a minute per
group) and is the one layer that waits out and retries a 429.

Files (:mod:`adapters.telegram.files`): inbound media are offered attachments, fetched by
``download`` (``getFile``, then the file URL streamed); ``SendFile`` uploads a photo or a
document (``upload_limit`` 50 MB). Albums fold into one event (:mod:`adapters.telegram.albums`).

Streaming (:mod:`adapters.telegram.drafts`, docs/architecture.md "Streaming"): with
``streaming = "native"`` (the default) a ``LiveText`` call draws the answer as a message draft
with a Stop button in a private chat (``StreamRefused`` in groups: the gateway edits there);
the draft's Stop press becomes a ``stop`` event while that draft is live. Drafts count in the
chat's and the bot's windows like messages. With ``edit`` or ``off`` the adapter has no
drafts at all (``drafts`` is None): a send does not look for one, a ``LiveText`` call is
refused (``StreamRefused``) and a draft's Stop is never taken for a live one.

Errors: every outbound call's python-telegram-bot exception is translated once, where
:meth:`TelegramAdapter.perform` makes the call (:func:`adapters.telegram.errors.translate`),
so a call that succeeds enters no translating frame.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from telegram import Bot, BotCommand, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.constants import ChatAction, ParseMode
from telegram.error import InvalidToken, TelegramError

from adapters.base import (
    AdapterError,
    ButtonRows,
    Capabilities,
    Charges,
    ChatRef,
    EventSink,
    InboundEvent,
    RateLimit,
    SentMessage,
    StreamingMode,
    StreamRefused,
)
from adapters.calls import (
    AnswerPress,
    Call,
    Delete,
    Edit,
    LiveText,
    React,
    Send,
    SendFile,
    Typing,
)
from adapters.clock import MONOTONIC, PaceClock
from adapters.health import Clock, Health, HealthCell
from adapters.inbox import STORAGE_NOTICE, DurableInbox
from adapters.session_keys import SessionKeyRule
from adapters.telegram.albums import ALBUM_WINDOW, Albums, Sleep
from adapters.telegram.drafts import DraftStreams
from adapters.telegram.errors import platform_errors, translate
from adapters.telegram.files import UPLOAD_LIMIT, TelegramFiles
from adapters.telegram.inbox import Inbox, LiveStop, Normalized, no_live_stream
from adapters.telegram.limits import BOT_LIMIT, CHAT_LIMIT, GROUP_LIMIT, TELEGRAM_CHARGES
from adapters.telegram.normalize import (
    PLATFORM,
    BotIdentity,
    Normalizer,
    default_session_key,
)
from adapters.telegram.polling import (
    TOKEN_REJECTED,
    LongPoller,
    PollSettings,
    RawUpdates,
    install_log_filter,
)
from adapters.telegram.render import TelegramRenderer
from adapters.telegram.transport import AiohttpRequest
from core.attachments import Attachment
from core.store.base import Store
from core.tasks import TaskSet

if TYPE_CHECKING:
    from adapters.telegram.webhook import WebhookServer, WebhookSettings

_log = logging.getLogger(__name__)

MAX_TEXT_UTF16 = 4096
BUTTON_PAYLOAD_LIMIT = 64
DEFAULT_API_URL = "https://api.telegram.org/bot"
DEFAULT_FILE_URL = "https://api.telegram.org/file/bot"

TELEGRAM_REACTIONS = {"✅": "👍", "❌": "👎"}
"""Status reactions Telegram's reaction list lacks, and what stands in for them."""
STREAM_INTERVAL = 1.0
"""Fewest seconds between two drafts of one answer (Telegram animates the change)."""
STREAM_KEEPALIVE = 20.0
"""A draft fades ~30 s after its last update: a long tool step refreshes it this often."""

CommandMenu = Sequence[tuple[str, str]]
"""``(name, description)`` pairs for Telegram's command menu, in display order."""


@dataclass(frozen=True, slots=True)
class TelegramSettings:
    """Everything configurable about the adapter besides the token and the store."""

    base_url: str = DEFAULT_API_URL
    base_file_url: str = DEFAULT_FILE_URL
    commands: CommandMenu = ()
    edit_interval: float = 1.0
    poll: PollSettings = field(default_factory=PollSettings)
    webhook: WebhookSettings | None = None
    bot_limit: RateLimit | None = BOT_LIMIT
    chat_limit: RateLimit | None = CHAT_LIMIT
    group_limit: RateLimit | None = GROUP_LIMIT
    """Telegram's flood limits, paced by the gateway (``None``: not paced)."""
    charges: Charges = TELEGRAM_CHARGES
    """Which calls each of the three limits counts."""
    pace_clock: PaceClock = MONOTONIC
    """The clock the limits are measured on (a test's clock in tests)."""
    album_window: float = ALBUM_WINDOW
    """Seconds without a new part after which an album is folded (adapters/telegram/albums.py)."""
    album_sleep: Sleep = asyncio.sleep
    """How the album window is waited out (a test's gate in tests)."""
    streaming: StreamingMode = "native"
    """``[telegram] streaming``: drafts in private chats (edits in groups), edits, or off."""


def inline_keyboard(buttons: ButtonRows) -> InlineKeyboardMarkup | None:
    """Buttons as an inline keyboard; ``None`` for no buttons (an edit then removes them)."""
    if not any(buttons):
        return None
    for row in buttons:
        for button in row:
            if len(button.data.encode()) > BUTTON_PAYLOAD_LIMIT:
                raise ValueError(
                    f"button {button.label!r}: payload is {len(button.data.encode())} bytes, "
                    f"Telegram allows {BUTTON_PAYLOAD_LIMIT}"
                )
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(b.label, callback_data=b.data) for b in row] for row in buttons]
    )


def _thread(chat: ChatRef) -> int | None:
    return int(chat.thread_id) if chat.thread_id is not None else None


class TelegramAdapter:
    """The :class:`adapters.base.Adapter` for Telegram."""

    platform = PLATFORM

    def __init__(
        self,
        token: str,
        store: Store,
        settings: TelegramSettings | None = None,
        key_rule: SessionKeyRule = default_session_key,
        *,
        clock: Clock = time.time,
    ) -> None:
        self.settings = settings or TelegramSettings()
        self.health_cell = HealthCell(PLATFORM, clock)
        self.store = store
        self.key_rule = key_rule
        self.capabilities = Capabilities(
            max_text_length=MAX_TEXT_UTF16,
            length_unit="utf16",
            supports_edit=True,
            button_payload_limit=BUTTON_PAYLOAD_LIMIT,
            edit_interval=self.settings.edit_interval,
            markup="telegram_html",
            renderer=TelegramRenderer(),
            bot_limit=self.settings.bot_limit,
            chat_limit=self.settings.chat_limit,
            group_limit=self.settings.group_limit,
            charges=self.settings.charges,
            pace_clock=self.settings.pace_clock,
            upload_limit=UPLOAD_LIMIT,
            streaming=self.settings.streaming,
            stream_interval=STREAM_INTERVAL,
            stream_keepalive=STREAM_KEEPALIVE,
            stream_progress=True,
        )
        self.bot = self._build_bot(token)
        self.files = TelegramFiles(self.bot)
        self.drafts = DraftStreams(self.bot) if self.settings.streaming == "native" else None
        """The live drafts (``native`` streaming only; None: the bot draws none)."""
        install_log_filter()
        self.identity: BotIdentity | None = None
        self._inbox: Inbox | None = None
        self._poller: LongPoller | None = None
        self._polling = TaskSet(_log)
        self._webhook: WebhookServer | None = None

    def _build_bot(self, token: str) -> Bot:
        poll_read = float(self.settings.poll.timeout) + 5.0
        self._raw_updates = RawUpdates(connection_pool_size=1, read_timeout=poll_read)
        return Bot(
            token,
            base_url=self.settings.base_url,
            base_file_url=self.settings.base_file_url,
            request=AiohttpRequest(connection_pool_size=64),
            get_updates_request=self._raw_updates,
        )

    @property
    def health(self) -> Health:
        return self.health_cell.value

    @property
    def durable_inbox(self) -> DurableInbox[Normalized] | None:
        """This run's durable inbox (None before :meth:`start`): a cluster's sweeper
        redelivers through it (docs/cluster.md)."""
        return self._inbox.queue if self._inbox is not None else None

    # lifecycle -----------------------------------------------------------------------------
    async def start(self, sink: EventSink) -> None:
        """Connect, replay unfinished updates, and begin receiving; returns once receiving
        (or with ``health`` down when Telegram rejects the token)."""
        try:
            with platform_errors():
                await self.bot.initialize()
        except AdapterError as exc:
            if not isinstance(exc.__cause__, InvalidToken):
                raise
            self.health_cell.down(TOKEN_REJECTED)
            return
        self.identity = BotIdentity(self.bot.id, self.bot.username)
        normalizer = Normalizer(self.identity, self.key_rule)
        albums = Albums(sink, self.settings.album_window, self.settings.album_sleep)
        self._inbox = Inbox(
            self.store, self.bot, normalizer, sink, self._storage_notice, albums=albums,
            live_stop=self._live_stop(),
        )  # fmt: skip
        await self.set_commands(self.settings.commands)
        await self._inbox.replay()
        if self.settings.webhook is not None:
            await self._start_webhook(self._inbox, self.settings.webhook)
        else:
            await self._start_polling(self._inbox)
        self.health_cell.up()
        _log.info("telegram: receiving as @%s", self.identity.username)

    def _live_stop(self) -> LiveStop:
        """Whether a draft's Stop press is for the chat's live draft (then once):
        ``drafts.py``; with no drafts, never."""
        drafts = self.drafts
        if drafts is None:
            return no_live_stream

        def live_stop(event: InboundEvent) -> bool:
            return event.stream_id is not None and drafts.stop(event.chat, int(event.stream_id))

        return live_stop

    async def _storage_notice(self, chat: ChatRef) -> None:
        """Tell ``chat`` its messages wait for the store (once per outage; never raises)."""
        try:
            await self.perform(Send(chat, STORAGE_NOTICE, markup=False))
        except Exception as exc:
            _log.warning("telegram: could not tell chat %s the store is out: %s", chat.chat_id, exc)

    async def _start_polling(self, inbox: Inbox) -> None:
        with platform_errors():
            await self.bot.delete_webhook()
        self._poller = LongPoller(
            self.bot, inbox, self.settings.poll, self._raw_updates,
            health=self.health_cell,
        )  # fmt: skip
        self._polling.spawn(self._poller.run(), name="telegram-poll")

    async def _start_webhook(self, inbox: Inbox, settings: WebhookSettings) -> None:
        from adapters.telegram.webhook import WebhookServer  # aiohttp.web: webhook mode only

        self._webhook = WebhookServer(self.bot, inbox, settings)
        await self._webhook.start()
        with platform_errors():
            await self.bot.set_webhook(
                self._webhook.url,
                secret_token=settings.secret_token,
                allowed_updates=list(self.settings.poll.allowed_updates),
            )

    async def stop(self) -> None:
        """Stop receiving, cancel deliveries in flight (they replay next run), shut down."""
        await self._polling.aclose()
        if self._webhook is not None:
            await self._webhook.stop()
            self._webhook = None
        if self._inbox is not None:
            await self._inbox.close()
        await self.files.aclose()
        await self.bot.shutdown()
        self.health_cell.stopped()

    @property
    def webhook_url(self) -> str | None:
        """Where Telegram posts updates in webhook mode (``None`` when polling)."""
        return self._webhook.url if self._webhook is not None else None

    async def drain(self) -> None:
        """Wait until the updates received so far have been handled and marked."""
        if self._inbox is not None:
            await self._inbox.drain()

    def album_parts_waiting(self) -> int:
        """Album parts received and not yet folded into their event (tests, diagnostics)."""
        return self._inbox.albums.waiting() if self._inbox is not None else 0

    def download(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """The bytes of an attachment this adapter offered, streamed (``files.py``)."""
        return self.files.download(attachment)

    async def set_commands(self, commands: CommandMenu) -> None:
        """Publish the command menu (``setMyCommands``); an empty menu is not sent."""
        if not commands:
            return
        menu = [BotCommand(name, description) for name, description in commands]
        with platform_errors():
            await self.bot.set_my_commands(menu)

    # outbound ------------------------------------------------------------------------------
    async def perform(self, call: Call) -> SentMessage | None:
        """One outbound call (:mod:`adapters.calls`). The Bot API has no idempotency key:
        a ``Send.key`` (or ``SendFile.key``) is not sent (docs/architecture.md, "Exactly
        once")."""
        try:
            match call:
                case Send(chat, text, buttons, markup):
                    if self.drafts is not None:
                        self.drafts.message_sent(chat)
                    return await self._send(chat, text, buttons, markup)
                case SendFile(chat, file, caption):
                    if self.drafts is not None:
                        self.drafts.message_sent(chat)
                    return await self.files.send(chat, file, caption)
                case Edit(message, text, buttons, markup):
                    await self._edit(message, text, buttons, markup)
                case Delete(message):
                    await self._delete(message)
                case AnswerPress(event, text):
                    await self._answer(event, text)
                case Typing(chat):
                    await self._typing(chat)
                case LiveText(chat):
                    if self.drafts is None:
                        raise StreamRefused(
                            f"telegram chat {chat.chat_id}: this bot draws no drafts"
                        )
                    await self.drafts.perform(call)
                case React(message, emoji):
                    await self._react(message, emoji)
        except TelegramError as exc:
            raise translate(exc) from exc
        return None

    async def _send(
        self, chat: ChatRef, text: str, buttons: ButtonRows, markup: bool
    ) -> SentMessage:
        message = await self.bot.send_message(
            chat_id=chat.chat_id,
            text=text,
            parse_mode=ParseMode.HTML if markup else None,
            reply_markup=inline_keyboard(buttons) if buttons else None,
            message_thread_id=_thread(chat),
        )
        return SentMessage(chat, str(message.message_id))

    async def _edit(
        self, message: SentMessage, text: str, buttons: ButtonRows, markup: bool
    ) -> None:
        await self.bot.edit_message_text(
            text=text,
            chat_id=message.chat.chat_id,
            message_id=int(message.message_id),
            parse_mode=ParseMode.HTML if markup else None,
            reply_markup=inline_keyboard(buttons) if buttons else None,
        )

    async def _delete(self, message: SentMessage) -> None:
        await self.bot.delete_message(message.chat.chat_id, int(message.message_id))

    async def _react(self, message: SentMessage, emoji: str) -> None:
        """``setMessageReaction``: the bot's one reaction on the message, replaced (its
        emoji from Telegram's list: ✅/❌ are not on it, 👍/👎 stand in)."""
        await self.bot.set_message_reaction(
            message.chat.chat_id,
            int(message.message_id),
            reaction=TELEGRAM_REACTIONS.get(emoji, emoji),
        )

    async def _answer(self, event: InboundEvent, text: str | None) -> None:
        if event.press_id is None:
            return
        await self.bot.answer_callback_query(event.press_id, text=text)

    async def _typing(self, chat: ChatRef) -> None:
        await self.bot.send_chat_action(
            chat.chat_id, ChatAction.TYPING, message_thread_id=_thread(chat)
        )
