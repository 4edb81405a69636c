"""The web chat adapter: a browser conversation is a chat like any other.

The adapter serves one page (``static/index.html`` + ES-module JavaScript, no build step)
with ``aiohttp.web``. The browser talks to it through:

* ``GET /api/events?conversation=<id>`` — Server-Sent Events: a snapshot of the
  conversation, then every change (see :mod:`adapters.web.feed`), resumable with
  ``Last-Event-ID``;
* ``POST /api/upload?conversation=<id>`` — one file (multipart), streamed into the
  conversation's spool, ≤ ``max_upload_bytes``; answers ``{upload, name, size}``
  (:mod:`adapters.web.uploads`);
* ``POST /api/send`` ``{conversation, id, text, uploads}`` — a message or a typed command
  (``/stop``, ``/steer ...``), idempotent by the page's ``id`` (:mod:`adapters.web.inbox`);
  ``uploads`` (upload ids of this conversation) become the message's offered attachments,
  which the gateway fetches with :meth:`WebAdapter.download`;
* ``POST /api/press`` ``{conversation, message, data}`` — a button on a message (approval
  cards, clarify choices), delivered as a ``button`` event like Telegram's presses;
* ``GET /api/files/<id>?conversation=<id>`` — a file the agent sent (``SendFile``), to
  that conversation's page only, as a download (:mod:`adapters.web.files`).

Outbound, the gateway's pipeline makes ``Send``/``Edit``/``Delete`` calls through
:meth:`WebAdapter.perform` as for any platform; the text is rendered to sanitised HTML here
(:mod:`adapters.web.render`) and published to the conversation's feed. A streaming reply's
text comes as ``LiveText`` calls as it arrives (``Capabilities.live_text``) and goes to
the page as ``delta`` events, until the rendered reply takes its place
(:mod:`adapters.web.feed`). A conversation's session key is
``web:dm:<conversation id>``; the person at the browser is ``settings.user``
(platform-qualified ``web:<user>``), never a name taken from a request.

Other parts of the gateway may add routes to the same server (:meth:`WebAdapter.add_routes`,
before ``start``): they share its access rules (:mod:`adapters.web.access`).

Health (``adapter.health``, docs/architecture.md §10): ``up`` once listening, ``stopped``
after ``stop``. If the listen address cannot be bound, ``start`` returns without serving and
without logging, its health ``down`` with the reason ("127.0.0.1:8765 is in use — set [web]
listen ..."): the gateway reports it — it stops with that one line when no other platform
is enabled (nothing else could reach the agent), else it warns once and runs on
(:mod:`gateway.app`).
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import logging
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path

from aiohttp import web

from adapters.base import (
    ButtonRows,
    Capabilities,
    ChatRef,
    DownloadFailed,
    EventSink,
    InboundEvent,
    MessageGone,
    Sender,
    SentMessage,
    SessionKey,
)
from adapters.calls import (
    AnswerPress,
    Call,
    Delete,
    Edit,
    LiveMode,
    LiveText,
    React,
    Send,
    SendFile,
    Typing,
)
from adapters.health import Health
from adapters.render.markdown import CommonMarkRenderer
from adapters.web.access import AccessGate
from adapters.web.feed import Feed, Feeds, Json
from adapters.web.files import SentFile, SentFiles, file_id_of
from adapters.web.history import chunk_message_id, load_history
from adapters.web.inbox import PLATFORM, WebInbox, WebMessage
from adapters.web.render import plain_html, to_html
from adapters.web.routes import ChatRoutes
from adapters.web.uploads import DEFAULT_MAX_BYTES, Clock, UnknownUpload, UploadSpool
from core.attachments import Attachment, OutgoingFile
from core.store.base import Store, turn_of_chunk

_log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"
DEFAULT_LISTEN = ("127.0.0.1", 8765)
SHUTDOWN_SECONDS = 2.0
UPLOAD_LIMIT = 100 * 1024 * 1024
"""The largest file the agent may send to the web chat (``Capabilities.upload_limit``)."""

RouteInstaller = Callable[[web.Application], None]


@dataclass(frozen=True, slots=True)
class WebSettings:
    host: str = DEFAULT_LISTEN[0]
    port: int = DEFAULT_LISTEN[1]
    token: str | None = None
    """Required by every request when set (see :mod:`adapters.web.access`)."""
    user: str = "local"
    """Who the person at the browser is (``web:<user>`` for approvals and allowlists)."""
    edit_interval: float = 0.2


def capabilities(settings: WebSettings) -> Capabilities:
    return Capabilities(
        max_text_length=100_000,
        length_unit="codepoints",
        supports_edit=True,
        button_payload_limit=256,
        edit_interval=settings.edit_interval,
        markup="markdown",
        renderer=CommonMarkRenderer(),
        live_text=True,
        upload_limit=UPLOAD_LIMIT,
    )


def session_key_of(conversation: str) -> SessionKey:
    return SessionKey(PLATFORM, "dm", conversation)


def parse_command(text: str) -> tuple[str, str] | None:
    """``"/steer go left"`` → ``("steer", "go left")``; None when not a command."""
    if not text.startswith("/") or len(text) < 2:
        return None
    head, _, args = text[1:].partition(" ")
    name = head.partition("@")[0].lower()
    return (name, args.strip()) if name.isascii() and name.replace("_", "").isalnum() else None


class WebAdapter:
    """The :class:`adapters.base.Adapter` for the browser."""

    platform = PLATFORM

    def __init__(
        self,
        store: Store,
        settings: WebSettings | None = None,
        *,
        spool_dir: Path | None = None,
        max_upload_bytes: int = DEFAULT_MAX_BYTES,
        clock: Clock = time.time,
    ) -> None:
        """``spool_dir`` holds uploads and sent files (default: a private temporary
        folder, removed at ``stop``); ``max_upload_bytes`` caps one upload
        (``[attachments] max_bytes``); ``clock`` (wall seconds) times their lifetimes."""
        self.settings = settings or WebSettings()
        self.store = store
        self.capabilities = capabilities(self.settings)
        self._temporary_spool = spool_dir is None
        root = spool_dir or Path(tempfile.mkdtemp(prefix="commonos-web-"))
        self.uploads = UploadSpool(root, max_upload_bytes, clock=clock)
        self.sent_files = SentFiles(root, UPLOAD_LIMIT)
        self.clock = clock
        self.feeds = Feeds()
        self.gate = AccessGate(self.settings.token)
        self.closing = asyncio.Event()
        self.app = self._build_app()
        self.url: str | None = None
        """Where the chat is served, once listening."""
        self.health = Health("starting", time.time())
        self._runner: web.AppRunner | None = None
        self._inbox: WebInbox | None = None
        self._ids = itertools.count(1)
        self._presses = itertools.count(1)

    @property
    def sender(self) -> Sender:
        return Sender(id=self.settings.user, name=self.settings.user)

    def _build_app(self) -> web.Application:
        app = web.Application(middlewares=[self.gate.middleware], client_max_size=256 * 1024)
        ChatRoutes(self).install(app)
        app.router.add_static("/static", STATIC_DIR, append_version=False)
        return app

    def add_routes(self, install: RouteInstaller) -> None:
        """Let another part of the gateway serve routes here (call before ``start``)."""
        install(self.app)

    # lifecycle -----------------------------------------------------------------------
    async def start(self, sink: EventSink) -> None:
        """Replay unfinished messages and serve; an address that cannot be bound leaves
        ``health`` down with the reason (reported by the gateway, never raised)."""
        self.closing.clear()
        self.sweep()
        self._inbox = WebInbox(self.store, sink, self._event_of, activity=self._busy)
        runner = web.AppRunner(self.app, shutdown_timeout=SHUTDOWN_SECONDS, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.settings.host, self.settings.port).start()
        except OSError as exc:
            await runner.cleanup()
            self.health = Health("down", time.time(), self._unbound(exc))
            return
        self._runner = runner
        self.url = _url_of(runner, self.settings.host)
        await self._inbox.replay()
        self.health = Health("up", time.time())
        _log.info("web chat: %s", self.url)

    def _unbound(self, exc: OSError) -> str:
        where = f"{self.settings.host}:{self.settings.port}"
        if exc.errno == errno.EADDRINUSE:
            what = f"{where} is in use"
        else:
            what = f"cannot listen on {where}: {exc.strerror or exc}"
        return f"{what} — set [web] listen (or COMMONOS_WEB_LISTEN) to a free address"

    async def stop(self) -> None:
        """Close event streams, stop serving, cancel deliveries (they replay next run)."""
        self.closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.url = None
        if self._inbox is not None:
            await self._inbox.close()
        if self._temporary_spool:
            self.uploads.remove_all()
        self.health = Health("stopped", time.time())

    async def drain(self) -> None:
        if self._inbox is not None:
            await self._inbox.drain()

    # inbound ------------------------------------------------------------------------
    async def feed(self, conversation: str) -> Feed:
        """The conversation's feed; a conversation new to this run loads its history."""
        if self.feeds.known(conversation):
            return self.feeds.get(conversation)
        history = await load_history(self.store, str(session_key_of(conversation)))
        return self.feeds.get(conversation, history)

    async def receive(self, message: WebMessage) -> bool:
        """A message typed in the page: shown, stored, delivered; False for a known id."""
        if self._inbox is None:
            raise RuntimeError("the web adapter is not started")
        feed = await self.feed(message.conversation)
        key = str(session_key_of(message.conversation))
        if not await self._inbox.accept(message, key):
            return False
        shown: Json = {"id": f"u-{message.client_id}", "role": "user"}
        shown["html"] = plain_html(message.text)
        if message.attachments:
            shown["files"] = [{"name": a.name, "size": a.size} for a in message.attachments]
        feed.add(shown)
        return True

    def claim_uploads(self, conversation: str, upload_ids: list[str]) -> tuple[Attachment, ...]:
        """The offered attachments for ``upload_ids``, all of ``conversation`` (else
        :class:`~adapters.web.uploads.UnknownUpload`, nothing claimed)."""
        return tuple(u.offered() for u in self.uploads.claim(conversation, upload_ids))

    def sweep(self) -> None:
        """Remove uploads and sent files past their lifetime (:mod:`adapters.web.uploads`)."""
        self.uploads.sweep()
        self.sent_files.sweep(self.clock())

    async def download(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """An uploaded file's bytes from the spool, in chunks."""
        try:
            async for chunk in self.uploads.chunks(attachment.source):
                yield chunk
        except UnknownUpload:
            raise DownloadFailed(
                f"{attachment.name}: the upload is gone (an upload not sent within an hour, "
                "or sent more than a day ago, is removed)"
            ) from None
        except OSError as exc:
            raise DownloadFailed(f"{attachment.name}: cannot be read ({exc.strerror})") from None

    async def press(self, conversation: str, message_id: str, data: str) -> None:
        """A button pressed in the page, handed to the sink like any platform's press."""
        if self._inbox is None:
            raise RuntimeError("the web adapter is not started")
        chat = ChatRef(PLATFORM, conversation)
        event = InboundEvent(
            kind="button",
            platform=PLATFORM,
            update_id=f"press-{next(self._presses)}",
            chat=chat,
            chat_type="dm",
            sender=self.sender,
            session_key=session_key_of(conversation),
            button_data=data,
            message=SentMessage(chat, message_id),
            press_id=f"{conversation}/{message_id}",
        )
        await self._inbox.sink(event)

    def _event_of(self, message: WebMessage) -> InboundEvent:
        chat = ChatRef(PLATFORM, message.conversation)
        event = InboundEvent(
            kind="text",
            platform=PLATFORM,
            update_id=message.update_id,
            chat=chat,
            chat_type="dm",
            sender=self.sender,
            session_key=session_key_of(message.conversation),
            text=message.text,
            attachments=message.attachments,
        )
        command = parse_command(message.text.strip())
        if command is None or message.attachments:
            return event
        name, args = command
        return replace(event, kind="command", command=name, args=args)

    def _busy(self, message: WebMessage, started: bool) -> None:
        self.feeds.get(message.conversation).set_busy(1 if started else -1)

    # outbound -----------------------------------------------------------------------
    async def perform(self, call: Call) -> SentMessage | None:
        """One outbound call (:mod:`adapters.calls`)."""
        match call:
            case Send(chat, text, buttons, markup, key):
                return await self._send(chat, text, buttons, markup, key)
            case SendFile(chat, file, caption, key):
                return await self._send_file(chat, self._keep(chat, file, key), caption)
            case Edit(message, text, buttons, markup):
                await self._edit(message, text, buttons, markup)
            case Delete(message):
                await self._delete(message)
            case AnswerPress(event, text):
                await self._answer(event, text)
            case Typing(chat):
                await self._typing(chat)
            case LiveText(chat, text, mode):
                await self._live_text(chat, text, mode)
            case React():
                pass  # the web chat shows the turn's state itself: no reactions
        return None

    async def _send(
        self, chat: ChatRef, text: str, buttons: ButtonRows, markup: bool, key: str | None
    ) -> SentMessage:
        feed = await self.feed(chat.chat_id)
        if key is not None and (shown := _shown_chunk(feed, key)) is not None:
            return SentMessage(chat, shown)  # sent before (a replay): the page shows it once
        message_id = (
            f"{self.feeds.epoch}-{next(self._ids)}" if key is None else chunk_message_id(key)
        )
        feed.add(
            {
                "id": message_id,
                "role": "bot",
                "html": to_html(text, markup=markup),
                "markup": markup,
                "buttons": _buttons(buttons),
            },
            reply=markup,
        )
        return SentMessage(chat, message_id)

    def _keep(self, chat: ChatRef, file: OutgoingFile, key: str | None) -> SentFile:
        return self.sent_files.keep(chat.chat_id, file, file_id_of(key), self.clock())

    async def _send_file(self, chat: ChatRef, sent: SentFile, caption: str) -> SentMessage:
        """A file as a feed item with its download link; once per id (see
        :mod:`adapters.web.files`)."""
        feed = await self.feed(chat.chat_id)
        if sent.id not in feed.messages:
            item: Json = {"id": sent.id, "role": "bot", "html": plain_html(caption)}
            feed.add({**item, "markup": False, "buttons": [], "file": sent.shown()})
        return SentMessage(chat, sent.id)

    async def _edit(
        self, message: SentMessage, text: str, buttons: ButtonRows, markup: bool
    ) -> None:
        feed = await self.feed(message.chat.chat_id)
        changes = {"html": to_html(text, markup=markup), "markup": markup}
        changes = {**changes, "buttons": _buttons(buttons)}
        if feed.edit(message.message_id, changes, reply=markup) is None:
            raise MessageGone(f"web message {message.message_id} is gone")

    async def _delete(self, message: SentMessage) -> None:
        feed = await self.feed(message.chat.chat_id)
        if feed.delete(message.message_id) is None:
            raise MessageGone(f"web message {message.message_id} is gone")

    async def _answer(self, event: InboundEvent, text: str | None) -> None:
        if text:
            feed = await self.feed(event.chat.chat_id)
            feed.signal("toast", {"text": text})

    async def _typing(self, chat: ChatRef) -> None:
        feed = await self.feed(chat.chat_id)
        feed.signal("typing", {})

    async def _live_text(self, chat: ChatRef, text: str, mode: LiveMode) -> None:
        """The streaming reply's text, as it arrives (``gateway.turns.live_text``): plain text,
        shown by the page until the rendered reply replaces it."""
        feed = await self.feed(chat.chat_id)
        feed.live_text(text, mode)


def _shown_chunk(feed: Feed, key: str) -> str | None:
    """The feed id already showing reply chunk ``key``: the chunk itself (sent earlier in
    this run), or its turn's whole reply loaded from the store (a chunk in flight when
    the last run stopped, sent again by the replay)."""
    if chunk_message_id(key) in feed.messages:
        return chunk_message_id(key)
    turn = turn_of_chunk(key)
    return next((m["id"] for m in feed.messages.values() if m.get("turn") == turn), None)


def _buttons(rows: ButtonRows) -> list[list[Json]]:
    """Each button as ``{label, data, role}``: the page colours it by ``role``."""
    return [
        [{"label": b.label, "data": b.data, "role": b.role} for b in row] for row in rows if row
    ]


def _url_of(runner: web.AppRunner, host: str) -> str:
    """The address actually bound (the port is the OS's choice when 0 was asked)."""
    port = DEFAULT_LISTEN[1]
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            port = int(address[1])
            break
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"
