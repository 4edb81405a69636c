"""A Telegram Bot API simulator on 127.0.0.1 for driving the real python-telegram-bot.

Fixture: ``telegram_sim`` (started and stopped per test, proxies cleared). Point PTB at it::

    app = (Application.builder().token(sim.token)
           .base_url(f"{sim.url}/bot").base_file_url(f"{sim.url}/file/bot").build())
    await app.initialize(); await app.start()
    await app.updater.start_polling(poll_interval=0, timeout=1)
    ...
    await app.updater.stop(); await app.stop(); await app.shutdown()

Imports: ``from tests.platform_sim.telegram_sim import ALICE, BOB, FloodLimits, SimError,
TelegramSim``. Settings are plain attributes a test may change: ``flood``, ``privacy_mode``,
``callback_window``, ``webhook_retry_delay``. The bot can only write to chats the simulator
knows: one a user has spoken in, or one made with ``sim.chat(id)`` / ``sim.add_group(...)``.

Acting as users (each returns at once; the bot receives the update on its next getUpdates)::

    msg = await sim.user_says(ALICE.id, "/start")              # private chat with Alice
    await sim.user_says(-100500, "hi @test_bot", user=BOB)      # supergroup, mention entity
    await sim.user_says(FORUM, "in topic", thread=7)            # forum topic 7 (see add_group)
    await sim.user_says(chat, "re", reply_to=some_sim_message)
    query_id = await sim.press_button(bot_msg, "approve:1", user=ALICE)
    await sim.press_button(bot_msg, "approve:1", seen=bot_msg.history[0])  # a stale copy
    await sim.redeliver(int(msg.event_id))     # the confirmation was lost: delivered again
    await sim.push_update("message", raw_json)  # any hand-made update (e.g. a malformed one)
    await sim.push_raw({"message": ...}, update_id=2**70)  # raw JSON, delivered as given

Looking at the conversation (``SimMessage``: ``text`` plain, ``raw`` wire JSON, ``history``
earlier versions, ``buttons`` [``SimButton(label, data, url)``], ``deleted``)::

    sim.messages(chat); sim.bot_messages(chat); sim.last_bot_message(chat)
    reply = await sim.wait_for_bot_message(chat, lambda m: "done" in m.text, timeout=5)
    await sim.wait_for(lambda: sim.answers.get(query_id), timeout=5)   # any predicate
    sim.chat_actions(chat)            # [(action, thread, at)] from sendChatAction
    sim.commands()                    # last setMyCommands for the default scope

Pollers (several gateway processes, one bot): ``sim.polls`` keeps every getUpdates as a
``PollRecord(peer, started, ended, status, abandoned)``; ``sim.overlapping_polls()`` lists
pairs from two connections in flight at once, ``sim.poll_conflicts()`` the polls answered
409 — both empty when exactly one process polls at a time.
Protocol assertions: ``sim.calls`` (``Call(method, params, at, status)``; ``at`` is monotonic,
for edit pacing), ``sim.updates`` (``TgUpdate`` with ``deliveries`` and ``confirmed_at``),
``sim.confirmations`` (``Confirmation(offset, update_ids, at)``: which getUpdates offset
confirmed which updates), ``sim.is_confirmed(update_id)``; a user message's update id is
``int(msg.event_id)``. Webhook mode: ``setWebhook(url, secret_token)`` makes the sim POST
updates to ``url`` with ``X-Telegram-Bot-Api-Secret-Token``; only a 2xx confirms
(``sim.webhook_posts`` lists ``(update_id, status)``); http:// is accepted for loopback only.

Faults: ``sim.fail_next("sendMessage", SimError.rate_limit(0.2))`` (also ``forbidden()``,
``not_found()``, ``server_error()``, ``platform("Bad Request: chat not found")``);
``sim.block_bot(chat)`` makes every later send to the chat 403 (blocked / kicked);
``sim.revoke_token()`` ends the bot's token as /revoke does (every later call, getUpdates
included, is 401 Unauthorized; a poll in flight is answered 401 too);
``await sim.drop_connection()`` resets every in-flight getUpdates (or, with none in flight,
the next one; PTB then retries after ~1 s); flood control:
``sim.flood = FloodLimits(per_chat=3, window=1.0, retry_after=0.2)`` (default 20 per chat and
30 in all per second, over which sends and edits get 429 with ``parameters.retry_after``),
measured on ``sim.clock`` (``time.monotonic``; the gateway harness gives it its test clock).
Telegram's per-chat bursts, opt-in: ``sim.flood = FloodLimits(chat_bursts=ChatBursts(burst=6,
per_second=1.0))`` — each chat's new messages and drafts come out of a token bucket (a
short burst, then about one a second); past it the answer is HTTP 429
``{"ok":false,"error_code":429,"description":"Too Many Requests: retry after N",
"parameters":{"retry_after":N}}`` with N the whole seconds until a message may go again
(edits then count in ``total`` only).
``TelegramSim(privacy_mode=True)`` delivers only commands, @mentions of the bot and replies
to it from groups (the message still appears in ``messages(chat)``, with no ``event_id``).
Drafts (``tests/platform_sim/telegram_drafts.py``): ``sendMessageDraft`` kept per chat in
``sim.drafts`` (groups refused with TEXTDRAFT_PEER_INVALID, ``sim.refuse_drafts(chat)`` for
any chat, counted in the flood limit); ``await sim.press_stop(chat)`` presses a live draft's
Stop (``stopped_message_generation``, delivered only when ``allowed_updates`` asks for it).
Files (``tests/platform_sim/telegram_files.py``): ``await sim.user_sends(chat, "photo", data,
caption=...)`` (also document, voice, audio, video, video_note, animation) and
``await sim.user_sends_album(chat, [Media(...), ...])``; getFile and the download route serve
them (20 MB download limit, per-file counters in ``sim.files``); sendDocument/sendPhoto
(multipart, 50 MB, photo checks) are kept in ``sim.files.sent``; captions are limited to 1024
UTF-16 units.

Two bots in one group (``sim.add_bot(token, username)`` → the second bot's own
``TelegramSim`` view, served by this one's server at the same ``url``): chats, users and
the message log are shared; each bot has its own token, updates and calls. A message either
bot sends to a group is delivered to the other as a ``message`` update from a user with
``is_bot: true`` (as Telegram does for bots that can see each other's messages; privacy
mode applies); a user's message in a group reaches every bot in it. ``sim.bot_messages(chat,
bot=peer.bot)`` keeps one bot's messages.

Enforced with the real error texts: 4096 UTF-16 units ("message is too long"), 64-byte
callback_data (BUTTON_DATA_INVALID), "message is not modified", "message to edit not found",
parse_mode HTML/MarkdownV2 ("can't parse entities: ..."), answerCallbackQuery once and within
``callback_window`` ("query is too old ..."), forum "message thread not found", unknown chat,
one getUpdates at a time (409 "Conflict: terminated by other getUpdates request" to the
poll in flight when another arrives, recorded as no conflict when its client had gone, e.g.
a killed process), getUpdates while a webhook is set (409), wrong token (401),
unknown method (404, which PTB reports as InvalidToken). editMessageText without
``reply_markup`` removes the inline keyboard, as real Telegram does.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from aiohttp import ClientSession, web

from tests.platform_sim.base import Json, SimButton, SimError, SimMessage, SimServer
from tests.platform_sim.telegram_drafts import DraftBook, press_stop, stop_update
from tests.platform_sim.telegram_files import (
    FileStore,
    Media,
    MediaKind,
    download,
    media_message,
    read_multipart,
)
from tests.platform_sim.telegram_markup import utf16_len
from tests.platform_sim.telegram_types import (
    ALICE,
    BOB,
    CallbackQuery,
    ChatBucket,
    ChatBursts,
    Confirmation,
    FloodLimits,
    TgApiError,
    TgChat,
    TgUpdate,
    TgUser,
    Webhook,
    bad_request,
)

__all__ = [
    "ALICE", "BOB", "ChatBursts", "FloodLimits", "PollRecord", "SimError", "TelegramSim", "TgChat",
    "TgUpdate", "TgUser",
]  # fmt: skip
TOKEN = "123456:TEST-TOKEN"
ChatRef = int | str | TgChat  # a chat id (as int or as SimMessage.chat) or the chat itself
JSON_FIELDS = {
    "reply_markup", "entities", "allowed_updates", "commands", "scope", "link_preview_options",
    "reply_parameters", "caption_entities", "message_ids", "reaction",
}  # fmt: skip
INT_FIELDS = {
    "chat_id", "message_id", "offset", "limit", "timeout", "message_thread_id",
    "reply_to_message_id", "cache_time", "max_connections", "draft_id",
}  # fmt: skip
BOOL_FIELDS = {
    "show_alert", "drop_pending_updates", "disable_notification", "protect_content", "can_stop",
    "keep_on_stop",
}  # fmt: skip
DEFAULT_UPDATES = {"message", "edited_message", "callback_query", "channel_post", "my_chat_member"}
WEBHOOK_CONFLICT = (
    "Conflict: can't use getUpdates method while webhook is active; "
    "use deleteWebhook to delete the webhook first"
)
POLL_CONFLICT = (
    "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running"
)
_COMMAND = re.compile(r"(?<!\S)/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]+)?")
_MENTION = re.compile(r"(?<!\S)@[A-Za-z0-9_]{5,32}")


@dataclass(slots=True)
class PollRecord:
    """One getUpdates request as the simulator saw it (``sim.polls``)."""

    peer: str
    """The client's end of the connection, ``host:port``: one poller keeps one."""
    started: float
    """``time.monotonic()`` on arrival; ``ended`` once answered (``None`` while in flight)."""
    ended: float | None = None
    status: int | None = None
    """200, 409 (superseded, or a webhook is set), 401, 499 (dropped)."""
    abandoned: bool = False
    """Its client had gone (connection closed) when another getUpdates arrived: its 409
    reached nobody, so it is no conflict."""

    def overlaps(self, other: PollRecord) -> bool:
        """Both were in flight at one moment (an abandoned poll had no client by then)."""
        if self.abandoned or other.abandoned:
            return False
        first, second = sorted((self, other), key=lambda record: record.started)
        return first.ended is None or second.started < first.ended


@dataclass(slots=True)
class _Poll:
    """An in-flight getUpdates request."""

    request: web.Request
    record: PollRecord
    superseded: bool = False
    dropped: bool = False
    revoked: bool = False


class TelegramSim(SimServer):
    """The Bot API for one bot (``token``), its chats, users, updates and webhook."""

    platform = "telegram"

    def __init__(
        self,
        token: str = TOKEN,
        bot_username: str = "test_bot",
        *,
        flood: FloodLimits | None = None,
        callback_window: float = 15.0,
        webhook_retry_delay: float = 0.05,
        privacy_mode: bool = False,
    ) -> None:
        super().__init__()
        self.token = token
        self.bot = TgUser(int(token.split(":")[0]), "Test Bot", bot_username, is_bot=True)
        self.flood = flood or FloodLimits()
        self.callback_window = callback_window
        self.webhook_retry_delay = webhook_retry_delay
        self.privacy_mode = privacy_mode
        self.chats: dict[int, TgChat] = {}
        self.users: dict[int, TgUser] = {u.id: u for u in (ALICE, BOB)}
        self.updates: list[TgUpdate] = []
        self.confirmations: list[Confirmation] = []
        self.queries: dict[str, CallbackQuery] = {}
        self.answers: dict[str, Json] = {}
        self.my_commands: dict[tuple[str, str], list[Json]] = {}
        self.webhook: Webhook | None = None
        self.webhook_posts: list[tuple[int, int]] = []
        self.files = FileStore()
        self.drafts = DraftBook()
        self.blocked: set[int] = set()
        self.allowed_updates: set[str] = set(DEFAULT_UPDATES)
        self._messages: dict[int, list[SimMessage]] = {}
        self._message_ids: dict[int, itertools.count[int]] = {}
        self._update_ids = itertools.count(1)
        self.actions: list[tuple[int, str, int | None, float]] = []
        self._polls: list[_Poll] = []
        self.polls: list[PollRecord] = []
        """Every getUpdates received, in order (see :class:`PollRecord`)."""
        self._drop_next = False
        self._redelivering: set[int] = set()
        self._sends: list[tuple[int, float]] = []
        self.chat_buckets: dict[int, ChatBucket] = {}
        """Each chat's tokens when ``flood.chat_bursts`` is on."""
        self.fellows: list[TelegramSim] = [self]
        """Every bot on this simulator (:meth:`add_bot`), this one first."""

    # more bots ------------------------------------------------------------------------------
    def add_bot(self, token: str, username: str) -> TelegramSim:
        """A second bot on this simulator: its own view, sharing chats, users and messages."""
        peer = TelegramSim(token, username, flood=self.flood, privacy_mode=self.privacy_mode)
        peer.url, peer.port, peer.clock = self.url, self.port, self.clock
        peer.chats, peer.users, peer.errors = self.chats, self.users, self.errors
        peer._messages, peer._message_ids = self._messages, self._message_ids
        peer._changed, peer.fellows = self._changed, self.fellows
        self.fellows.append(peer)
        return peer

    async def relay(self, chat: TgChat, raw: Json, reply_to: SimMessage | None = None) -> None:
        """The other bots in a group see ``raw``, a message of ours or a user's."""
        if chat.type == "private":
            return
        for fellow in self.fellows:
            if fellow is not self and fellow._sees(chat, raw, reply_to):
                await fellow.push_update("message", dict(raw))

    def _sees(self, chat: TgChat, raw: Json, reply_to: SimMessage | None) -> bool:
        """Whether this bot is sent ``raw`` (not its own; privacy mode applied)."""
        if raw["from"]["id"] == self.bot.id:
            return False
        return not self.privacy_mode or self._meant_for_bot(chat, raw, reply_to)

    async def stop(self) -> None:
        for fellow in self.fellows:
            fellow.closing = True
        await super().stop()

    # chats and users ------------------------------------------------------------------------
    def add_group(
        self, chat_id: int, title: str = "Team", *, forum: bool = False, supergroup: bool = True
    ) -> TgChat:
        """Register a group (a supergroup unless ``supergroup=False``); forums have topics."""
        kind = "supergroup" if supergroup or forum else "group"
        chat = TgChat(chat_id, kind, title, is_forum=forum)
        self.chats[chat_id] = chat
        return chat

    def chat(self, chat: ChatRef) -> TgChat:
        """The chat with this id, created on first use (positive: private, negative: group)."""
        chat_id = chat.id if isinstance(chat, TgChat) else int(chat)
        if chat_id not in self.chats:
            if chat_id > 0:
                self.chats[chat_id] = TgChat(chat_id, "private", owner=self.user(chat_id))
            else:
                self.add_group(chat_id, supergroup=str(chat_id).startswith("-100"))
        return self.chats[chat_id]

    def block_bot(self, chat: ChatRef) -> None:
        """The user blocks the bot (private chat) or removes it (group): sends get 403."""
        self.blocked.add(self.chat(chat).id)

    def refuse_drafts(self, chat: ChatRef) -> None:
        """``sendMessageDraft`` into ``chat`` is answered ``TEXTDRAFT_PEER_INVALID`` from now on."""
        self.drafts.refusing.add(self.chat(chat).id)

    async def press_stop(
        self, chat: ChatRef, draft_id: int | None = None, *, thread: int | None = None
    ) -> TgUpdate:
        """The user presses Stop on the chat's live draft (``telegram_drafts.py``)."""
        return await press_stop(self, self.chat(chat), draft_id, thread)

    async def stop_update(
        self, chat: ChatRef, draft_id: int, *, thread: int | None = None
    ) -> TgUpdate:
        """A ``stopped_message_generation`` update for ``draft_id``, whatever its state."""
        return await stop_update(self, self.chat(chat), draft_id, thread)

    def user(self, user_id: int) -> TgUser:
        return self.users.setdefault(user_id, TgUser(user_id, f"User{user_id}", f"user{user_id}"))

    # the conversation -----------------------------------------------------------------------
    def messages(self, chat: ChatRef) -> list[SimMessage]:
        return list(self._messages.get(self.chat(chat).id, []))

    def bot_messages(self, chat: ChatRef, *, bot: TgUser | None = None) -> list[SimMessage]:
        """Messages from bots; ``bot``: from that bot only."""
        return [
            m
            for m in self.messages(chat)
            if m.from_bot and (bot is None or m.author == str(bot.id))
        ]

    def last_bot_message(self, chat: ChatRef) -> SimMessage | None:
        sent = [m for m in self.bot_messages(chat) if not m.deleted]
        return sent[-1] if sent else None

    def find_message(self, chat_id: int, message_id: int) -> SimMessage | None:
        for m in self._messages.get(chat_id, []):
            if m.id == str(message_id):
                return m
        return None

    async def wait_for_bot_message(
        self,
        chat: ChatRef,
        pred: Callable[[SimMessage], bool] | None = None,
        timeout: float = 5.0,
    ) -> SimMessage:
        """The first bot message in ``chat`` (not deleted) matching ``pred``."""

        def found() -> SimMessage | None:
            live = (m for m in self.bot_messages(chat) if not m.deleted)
            return next((m for m in live if pred is None or pred(m)), None)

        return await self.wait_for(found, timeout)

    def chat_actions(self, chat: ChatRef) -> list[tuple[str, int | None, float]]:
        chat_id = self.chat(chat).id
        return [(a, thread, at) for c, a, thread, at in self.actions if c == chat_id]

    def commands(self, scope: str = "default", language: str = "") -> list[Json]:
        return self.my_commands.get((scope, language), [])

    def is_confirmed(self, update_id: int) -> bool:
        return any(u.update_id == update_id and u.confirmed_at for u in self.updates)

    def pending(self) -> list[TgUpdate]:
        return [u for u in self.updates if u.confirmed_at is None]

    # acting as users ------------------------------------------------------------------------
    async def user_says(
        self,
        chat: ChatRef,
        text: str,
        *,
        user: TgUser | None = None,
        thread: int | None = None,
        reply_to: SimMessage | None = None,
    ) -> SimMessage:
        """A user's text message: queued as an update with bot_command/mention entities."""
        tg_chat = self.chat(chat)
        sender = user or tg_chat.owner or ALICE
        self.users.setdefault(sender.id, sender)
        raw = self.new_message(tg_chat, sender, text, thread=thread)
        if entities := _user_entities(text):
            raw["entities"] = entities
        if reply_to is not None:
            raw["reply_to_message"] = reply_to.raw
        msg = self.store(tg_chat.id, raw)
        if self.privacy_mode and not self._meant_for_bot(tg_chat, raw, reply_to):
            await self.relay(tg_chat, raw, reply_to)
            await self.changed()  # seen by the group, not delivered to a bot in privacy mode
            return msg
        update = await self.push_update("message", raw)
        msg.event_id = str(update.update_id)
        await self.relay(tg_chat, raw, reply_to)
        return msg

    async def user_sends(
        self,
        chat: ChatRef,
        kind: MediaKind,
        data: bytes,
        *,
        caption: str | None = None,
        name: str | None = None,
        mime: str | None = None,
        size: int | None = None,
        user: TgUser | None = None,
    ) -> SimMessage:
        """A user's photo, document, voice note, ... (``telegram_files.py``), with a caption."""
        media = Media(kind, data, name, mime, size, caption)
        return (await self.user_sends_album(chat, [media], user=user, album=False))[0]

    async def user_sends_album(
        self,
        chat: ChatRef,
        parts: list[Media],
        *,
        caption: str | None = None,
        user: TgUser | None = None,
        album: bool = True,
    ) -> list[SimMessage]:
        """An album: one message per part sharing a ``media_group_id`` (``caption`` goes on
        the first part, as Telegram clients put it), all queued at once."""
        tg_chat = self.chat(chat)
        sender = user or tg_chat.owner or ALICE
        self.users.setdefault(sender.id, sender)
        group = f"13{self.next_id():015d}" if album else None
        if caption is not None and parts:
            parts = [Media(**{**_fields(parts[0]), "caption": caption}), *parts[1:]]
        said: list[SimMessage] = []
        for media in parts:
            entities = _user_entities(media.caption or "")
            raw = media_message(self, tg_chat.id, sender, media, group, entities)
            msg = self.store(tg_chat.id, raw)
            msg.text = media.caption or ""
            if not self.privacy_mode or self._meant_for_bot(tg_chat, raw, None):
                update = TgUpdate(next(self._update_ids), "message", raw)
                self.updates.append(update)
                msg.event_id = str(update.update_id)
            said.append(msg)
        await self.changed()
        return said

    def _meant_for_bot(self, chat: TgChat, raw: Json, reply_to: SimMessage | None) -> bool:
        """Privacy mode: in groups a bot gets commands, mentions of it and replies to it."""
        if chat.type == "private" or (reply_to is not None and reply_to.from_bot):
            return True
        text: str = raw.get("text") or raw.get("caption") or ""
        entities: list[Json] = raw.get("entities") or raw.get("caption_entities") or []
        me = f"@{self.bot.username}"
        for e in entities:
            part = text[e["offset"] : e["offset"] + e["length"]]  # ASCII: units == chars
            if e["type"] == "mention" and part == me:
                return True
            if e["type"] == "bot_command" and ("@" not in part or part.endswith(me)):
                return True
        return False

    async def user_edits(self, msg: SimMessage, text: str) -> SimMessage:
        """The user edits their message ``msg``: an ``edited_message`` update."""
        msg.history.append(dict(msg.raw))
        raw = {**msg.raw, "text": text, "edit_date": int(time.time())}
        raw.pop("entities", None)
        if entities := _user_entities(text):
            raw["entities"] = entities
        msg.raw, msg.text = raw, text
        await self.push_update("edited_message", raw)
        return msg

    async def press_button(
        self,
        msg: SimMessage,
        data: str,
        *,
        user: TgUser | None = None,
        seen: Json | None = None,
    ) -> str:
        """Press the inline button carrying ``data`` on ``msg``; returns the callback query id.

        ``seen`` is the message as the user's client still shows it (e.g. ``msg.history[0]``):
        a press on a stale copy of a message that has since been edited.
        """
        shown = seen if seen is not None else msg.raw
        if msg.deleted or data not in {b.data for b in buttons_of(shown)}:
            raise ValueError(f"message {msg.id} has no live button with data {data!r}")
        chat = self.chat(int(msg.chat))
        sender = user or chat.owner or ALICE
        query = CallbackQuery(str(self.next_id() + 1000), msg, data, sender, time.monotonic())
        self.queries[query.id] = query
        payload = {"id": query.id, "from": sender.to_json(), "message": shown,
                   "chat_instance": f"ci{chat.id}", "data": data}  # fmt: skip
        await self.push_update("callback_query", payload)
        return query.id

    async def redeliver(self, update_id: int) -> None:
        """Telegram lost the confirmation of ``update_id``: the next getUpdates (or the one in
        flight) delivers it again whatever its offset, and a later offset confirms it again."""
        update = next(u for u in self.updates if u.update_id == update_id)
        update.confirmed_at = None
        self._redelivering.add(update_id)
        await self.changed()

    def new_message(
        self, chat: TgChat, sender: TgUser, text: str, *, thread: int | None = None
    ) -> Json:
        """Wire JSON of a new message in ``chat`` (the id is taken from the chat's counter)."""
        counter = self._message_ids.setdefault(chat.id, itertools.count(1))
        raw: Json = {"message_id": next(counter), "from": sender.to_json(),
                     "chat": chat.to_json(), "date": int(time.time()), "text": text}  # fmt: skip
        if thread is not None:
            raw["message_thread_id"] = thread
            if chat.is_forum:
                chat.topics.add(thread)
                raw["is_topic_message"] = True
        return raw

    def store(self, chat_id: int, raw: Json) -> SimMessage:
        author = raw["from"]
        msg = SimMessage("telegram", str(chat_id), str(raw["message_id"]), str(author["id"]),
                         author["is_bot"], raw.get("text", ""), buttons_of(raw), raw,
                         thread=_str_or_none(raw.get("message_thread_id")))  # fmt: skip
        self._messages.setdefault(chat_id, []).append(msg)
        return msg

    async def push_update(self, kind: str, payload: Json) -> TgUpdate:
        update = TgUpdate(next(self._update_ids), kind, payload)
        self.updates.append(update)
        await self.changed()
        return update

    async def push_raw(self, fields: Json, *, update_id: Any = None) -> TgUpdate:
        """Deliver ``{"update_id": ..., **fields}`` exactly as given, whatever it holds (an
        unknown type, wrong types, huge integers). Its ``update_id`` is the simulator's next
        one unless ``update_id`` is given; either way the simulator confirms it by its own
        id, like any update (so one with an unusable id is confirmed by a later offset)."""
        update = TgUpdate(next(self._update_ids), "raw", fields)
        update.raw = {"update_id": update.update_id if update_id is None else update_id, **fields}
        self.updates.append(update)
        await self.changed()
        return update

    # faults ---------------------------------------------------------------------------------
    async def revoke_token(self) -> str:
        """The owner revoked the token (@BotFather /revoke): the old one is 401 from now on,
        a getUpdates in flight included. Returns the new token."""
        self.token = f"{self.bot.id}:REVOKED-{self.next_id()}"
        for poll in self._polls:
            poll.revoked = True
        await self.changed()
        return self.token

    async def drop_connection(self) -> int:
        """Reset every in-flight getUpdates connection; returns how many were dropped.

        With none in flight, the next getUpdates is reset instead (and 0 is returned).
        """
        for poll in self._polls:
            poll.dropped = True
        self._drop_next = not self._polls
        await self.changed()
        return len(self._polls)

    def in_flight_polls(self) -> int:
        return len(self._polls)

    def polls_without_client(self) -> int:
        """In-flight getUpdates whose client has closed the connection."""
        return sum(1 for poll in self._polls if poll.request.transport is None)

    def overlapping_polls(self) -> list[tuple[PollRecord, PollRecord]]:
        """Pairs of getUpdates from two connections that were in flight at once."""
        return [
            (a, b)
            for n, a in enumerate(self.polls)
            for b in self.polls[n + 1 :]
            if a.peer != b.peer and a.overlaps(b)
        ]

    def poll_conflicts(self) -> list[PollRecord]:
        """The getUpdates answered 409 Conflict while their client was there to read it."""
        conflicts = (record for record in self.polls if record.status == HTTPStatus.CONFLICT)
        return [record for record in conflicts if not record.abandoned]

    def error_for(self, method: str, error: SimError) -> TgApiError:
        """Render an injected fault the way the Bot API answers it."""
        if error.kind == "rate_limit":
            ra = int(error.retry_after) if error.retry_after == int(error.retry_after) else None
            after = ra if ra is not None else error.retry_after
            return TgApiError(429, f"Too Many Requests: retry after {after}", after)
        default = {
            "forbidden": (403, "Forbidden: bot was blocked by the user"),
            "not_found": (400, _not_found_text(method)),
            "server_error": (error.status, HTTPStatus(error.status).phrase),
        }.get(error.kind, (error.status, "Bad Request"))
        status = default[0] if error.kind == "not_found" else error.status
        return TgApiError(status, str(error.code) if error.code else default[1])

    def check_flood(self, chat_id: int, *, edit: bool = False) -> None:
        """Count one send/edit to ``chat_id``; 429 when a flood limit is exceeded."""
        now, limits = self.clock(), self.flood
        self._sends = [(c, t) for c, t in self._sends if now - t < limits.window]
        in_chat = [t for c, t in self._sends if c == chat_id]
        checks = [([t for _, t in self._sends], limits.total)]
        if limits.chat_bursts is None:
            checks.insert(0, (in_chat, limits.per_chat))
        for recent, limit in checks:
            if len(recent) >= limit:
                wait = limits.retry_after
                if wait is None:
                    wait = max(1, int(limits.window - (now - recent[0]) + 0.999))
                raise TgApiError(429, f"Too Many Requests: retry after {wait}", wait)
        if limits.chat_bursts is not None and not edit:
            self._take_from_bucket(chat_id, limits.chat_bursts, now)
        self._sends.append((chat_id, now))

    def _take_from_bucket(self, chat_id: int, bursts: ChatBursts, now: float) -> None:
        """Telegram's per-chat bursts (``FloodLimits.chat_bursts``): 429 past the burst."""
        bucket = self.chat_buckets.get(chat_id)
        if bucket is None or bucket.bursts != bursts:
            bucket = self.chat_buckets[chat_id] = ChatBucket(bursts, now)
        wait = bucket.take(now)
        if wait is not None:
            raise TgApiError(429, f"Too Many Requests: retry after {wait}", wait)

    # HTTP -----------------------------------------------------------------------------------
    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_route("GET", "/file/bot{token}/{path:.*}", self._file)

    async def _file(self, request: web.Request) -> web.StreamResponse:
        """File downloads: ``{base_file_url}{token}/{file_path}`` as given by getFile."""
        return await download(self, request)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        token = request.match_info["token"]
        for fellow in self.fellows[1:] if self is self.fellows[0] else ():
            if fellow.token == token:
                return await fellow._handle(request)
        name = request.match_info["method"]
        known = [*self.methods(), "getUpdates"]
        method = next((m for m in known if m.lower() == name.lower()), name)
        too_large: TgApiError | None = None
        try:
            params = await _params(request, self.files.upload_limit)
        except ValueError:  # malformed JSON in a JSON-typed field
            params = {"_malformed": True}
        except TgApiError as exc:  # a multipart body over the upload limit
            params, too_large = {}, exc
        call = self.record(method, params, request.method)
        try:
            if too_large is not None:
                raise too_large
            if "_malformed" in params:
                raise bad_request("can't parse JSON object")
            result = await self._answer(request, method, params)
            await self.held(method, params)
            response = web.json_response({"ok": True, "result": result})
        except TgApiError as exc:
            response = web.json_response(exc.body(), status=exc.status)
        except _Dropped:
            if request.transport is not None:
                request.transport.abort()  # the client sees the connection reset
            response = web.Response(status=499)
        except Exception as exc:  # a simulator bug: fail the call at once, loudly
            self.internal_error(exc)
            response = web.json_response(bad_request(f"simulator bug: {exc!r}").body(), status=400)
        call.status = response.status
        await self.changed()
        return response

    def methods(self) -> dict[str, Any]:
        from tests.platform_sim.telegram_api import METHODS  # the methods import this module

        return METHODS

    async def _answer(self, request: web.Request, method: str, params: Json) -> Any:
        if request.match_info["token"] != self.token:
            raise TgApiError(401, "Unauthorized")
        if fault := self.take_fault(method):
            raise self.error_for(method, fault)
        if method == "getUpdates":
            return await self._get_updates(request, params)
        if method not in self.methods():
            raise TgApiError(404, "Not Found")
        return await self.methods()[method](self, params)

    # getUpdates -----------------------------------------------------------------------------
    async def _get_updates(self, request: web.Request, p: Json) -> list[Json]:
        record = PollRecord(_peer(request), time.monotonic())
        self.polls.append(record)
        try:
            return await self._poll(request, record, p)
        except TgApiError as exc:
            record.status = exc.status
            raise
        except _Dropped:
            record.status = 499
            raise
        finally:
            record.ended = time.monotonic()

    async def _poll(self, request: web.Request, record: PollRecord, p: Json) -> list[Json]:
        if self.webhook is not None:
            raise TgApiError(409, WEBHOOK_CONFLICT)
        self._confirm_before(int(p.get("offset", 0)))
        if "allowed_updates" in p:
            self.allowed_updates = set(p["allowed_updates"] or DEFAULT_UPDATES)
        for other in self._polls:
            other.superseded = True  # answered 409, to nobody if its client went away
            other.record.abandoned = other.request.transport is None
        poll = _Poll(request, record)
        self._polls.append(poll)
        poll.dropped, self._drop_next = self._drop_next, False
        try:
            batch = await self._long_poll(
                poll, float(p.get("timeout", 0)), int(p.get("limit", 100))
            )
        finally:
            self._polls.remove(poll)
        record.status = HTTPStatus.OK
        return batch

    async def _long_poll(self, poll: _Poll, timeout: float, limit: int) -> list[Json]:
        await self.changed()
        with contextlib.suppress(TimeoutError):
            await self.wait_for(lambda: self._poll_done(poll), timeout=max(timeout, 0.001))
        if poll.dropped:
            raise _Dropped
        if poll.revoked:
            raise TgApiError(401, "Unauthorized")
        if poll.superseded:
            raise TgApiError(409, POLL_CONFLICT)
        batch = self.deliverable()[: max(1, min(limit, 100))]
        for update in batch:
            update.deliveries += 1
            self._redelivering.discard(update.update_id)
        return [u.to_json() for u in batch]

    def _poll_done(self, poll: _Poll) -> bool:
        done = poll.dropped or poll.superseded or poll.revoked or self.closing
        return done or bool(self.deliverable())

    def deliverable(self) -> list[TgUpdate]:
        """Unconfirmed updates of an allowed type, oldest first (others are discarded)."""
        now = time.monotonic()
        for u in self.pending():
            if u.kind not in self.allowed_updates and u.raw is None:
                u.confirmed_at = now
        return self.pending()

    def _confirm_before(self, offset: int) -> None:
        pending = [u for u in self.pending() if u.update_id not in self._redelivering]
        if offset < 0:
            keep = {u.update_id for u in pending[offset:]}
            done = [u for u in pending if u.update_id not in keep]
        else:
            done = [u for u in pending if u.update_id < offset]
        now = time.monotonic()
        for u in done:
            u.confirmed_at = now
        if done:
            self.confirmations.append(Confirmation(offset, [u.update_id for u in done], now))

    # webhook push ---------------------------------------------------------------------------
    def start_webhook(self, hook: Webhook) -> None:
        self.webhook = hook
        self.spawn(self._push_updates(hook), "webhook")

    async def _push_updates(self, hook: Webhook) -> None:
        async with ClientSession() as http:
            while self.webhook is hook and not self.closing:
                batch = await self.wait_for(
                    lambda: self.webhook is not hook or self.closing or self.deliverable(),
                    timeout=3600,
                )
                if isinstance(batch, list):
                    await self._post_update(http, hook, batch[0])

    async def _post_update(self, http: ClientSession, hook: Webhook, update: TgUpdate) -> None:
        headers = {"X-Telegram-Bot-Api-Secret-Token": hook.secret_token or ""}
        if not hook.secret_token:
            headers = {}
        update.deliveries += 1
        try:
            async with http.post(hook.url, json=update.to_json(), headers=headers) as resp:
                status = resp.status
        except OSError as exc:
            status, hook.last_error = 0, f"Connection failed: {exc}"
        self.webhook_posts.append((update.update_id, status))
        if 200 <= status < 300:
            update.confirmed_at = time.monotonic()
        elif status:
            hook.last_error = f"Wrong response from the webhook: {status}"
        await self.changed()
        if not 200 <= status < 300:
            await self._backoff()

    async def _backoff(self) -> None:
        await asyncio.sleep(self.webhook_retry_delay)  # Telegram's own retry delay, not a wait


class _Dropped(Exception):
    """The in-flight getUpdates was told to drop its connection."""


def buttons_of(raw: Json) -> list[SimButton]:
    rows = (raw.get("reply_markup") or {}).get("inline_keyboard", [])
    return [SimButton(b["text"], b.get("callback_data"), b.get("url")) for row in rows for b in row]


def _user_entities(text: str) -> list[Json]:
    found = [("bot_command", m) for m in _COMMAND.finditer(text)]
    found += [("mention", m) for m in _MENTION.finditer(text)]
    found.sort(key=lambda f: f[1].start())
    return [{"type": kind, "offset": utf16_len(text[: m.start()]), "length": utf16_len(m.group())}
            for kind, m in found]  # fmt: skip


def _peer(request: web.Request) -> str:
    """``host:port`` of the client's end of the connection."""
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return f"{peer[0]}:{peer[1]}" if peer else "?"


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _not_found_text(method: str) -> str:
    if method.startswith("edit"):
        return "Bad Request: message to edit not found"
    if method.startswith("delete"):
        return "Bad Request: message to delete not found"
    return "Bad Request: chat not found"


def _fields(media: Media) -> dict[str, Any]:
    return {name: getattr(media, name) for name in Media.__dataclass_fields__}


async def _params(request: web.Request, upload_limit: int) -> Json:
    """Parameters from the query string and a form, multipart or JSON body, decoded per field
    (a multipart body is read part by part, 413 over ``upload_limit``)."""
    params: Json = dict(request.query)
    if request.content_type == "application/json":
        body = await request.json() if request.can_read_body else {}
        params.update(body)
        return params
    if request.can_read_body and request.content_type == "multipart/form-data":
        params.update(await read_multipart(request, upload_limit))
    elif request.can_read_body and request.content_type == "application/x-www-form-urlencoded":
        params.update(await request.post())
    return {k: _decode(k, v) for k, v in params.items()}


def _decode(key: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if key in JSON_FIELDS:
        return json.loads(value)
    if key in INT_FIELDS and re.fullmatch(r"-?\d+", value):
        return int(value)
    if key in BOOL_FIELDS:
        return value.lower() == "true"
    return value
