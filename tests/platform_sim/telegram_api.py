"""The Bot API methods of :class:`TelegramSim` (all but getUpdates), with their validation.

Each method takes the simulator and the decoded parameters, returns the ``result`` value, and
raises :class:`TgApiError` with the Bot API's own description when Telegram would refuse.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlparse

from tests.platform_sim.base import Json, SimMessage
from tests.platform_sim.telegram_drafts import send_message_draft
from tests.platform_sim.telegram_files import (
    SimFile,
    check_photo,
    get_file,
    image_size,
    keep_upload,
)
from tests.platform_sim.telegram_markup import MarkupError, parse, utf16_len
from tests.platform_sim.telegram_sim import TelegramSim, buttons_of
from tests.platform_sim.telegram_types import TgApiError, TgChat, Upload, Webhook, bad_request

Method = Callable[[TelegramSim, Json], Awaitable[Any]]
MAX_TEXT, MAX_CAPTION = 4096, 1024
CHAT_ACTIONS = {
    "typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
    "upload_document", "choose_sticker", "find_location", "record_video_note",
    "upload_video_note",
}  # fmt: skip
NOT_MODIFIED = (
    "message is not modified: specified new message content and reply markup are exactly the "
    "same as a current content and reply markup of the message"
)
_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")
_COMMAND_NAME = re.compile(r"[a-z0-9_]{1,32}")


async def get_me(sim: TelegramSim, p: Json) -> Json:
    return {**sim.bot.to_json(), "can_join_groups": True, "can_read_all_group_messages": False,
            "supports_inline_queries": False}  # fmt: skip


async def send_message(sim: TelegramSim, p: Json) -> Json:
    chat = known_chat(sim, p)
    text, entities = _text(p)
    markup = _inline_markup(p)
    thread = _thread(chat, p)
    reply = _reply_target(sim, chat, p)
    sim.check_flood(chat.id)
    sim.drafts.dismiss(chat.id, thread)
    raw = sim.new_message(chat, sim.bot, text, thread=thread)
    _set_content(raw, entities, markup)
    if reply is not None:
        raw["reply_to_message"] = reply.raw
    sim.store(chat.id, raw)
    await sim.relay(chat, raw, reply)
    return raw


async def send_document(sim: TelegramSim, p: Json) -> Json:
    return await _send_file(sim, p, "document")


async def send_photo(sim: TelegramSim, p: Json) -> Json:
    return await _send_file(sim, p, "photo")


async def _send_file(sim: TelegramSim, p: Json, kind: str) -> Json:
    """sendPhoto / sendDocument: an upload (multipart) or the file_id of a kept file."""
    chat = known_chat(sim, p)
    upload = p.get(kind)
    if isinstance(upload, str) and upload in sim.files:
        kept = sim.files[upload]
        upload = Upload(kept.name or kept.path.rpartition("/")[2], kept.mime, kept.data)
    if not isinstance(upload, Upload):
        raise bad_request(f"there is no {kind} in the request")
    caption, entities = _caption(p)
    if kind == "photo":
        check_photo(upload.data)
    markup, thread = _inline_markup(p), _thread(chat, p)
    sim.check_flood(chat.id)
    sim.drafts.dismiss(chat.id, thread)
    raw = sim.new_message(chat, sim.bot, "", thread=thread)
    del raw["text"]
    method = "sendPhoto" if kind == "photo" else "sendDocument"
    file = keep_upload(sim, method, chat.id, upload, caption, thread, raw["message_id"])
    raw[kind] = _file_json(kind, file)
    if caption:
        raw["caption"] = caption
    _set_content(raw, [], markup)
    if entities:
        raw["caption_entities"] = entities
    sim.store(chat.id, raw).text = caption
    return raw


def _file_json(kind: str, file: SimFile) -> Any:
    base = {"file_id": file.file_id, "file_unique_id": file.unique_id, "file_size": file.size}
    if kind == "photo":
        width, height = image_size(file.data) or (0, 0)
        return [base | {"width": width, "height": height}]
    return base | {"file_name": file.name, "mime_type": file.mime}


async def edit_message_text(sim: TelegramSim, p: Json) -> Json:
    msg = _editable(sim, p)
    text, entities = _text(p)
    markup = _inline_markup(p)  # omitted reply_markup removes the keyboard, as on Telegram
    old = msg.raw
    if (
        old.get("text") == text
        and old.get("entities") == (entities or None)
        and (old.get("reply_markup") == markup)
    ):
        raise bad_request(NOT_MODIFIED)
    sim.check_flood(int(msg.chat), edit=True)
    raw = {k: v for k, v in old.items() if k not in ("entities", "reply_markup")}
    raw["text"] = text
    _set_content(raw, entities, markup)
    return _replace(msg, raw)


async def edit_message_reply_markup(sim: TelegramSim, p: Json) -> Json:
    msg = _editable(sim, p)
    markup = _inline_markup(p)
    if msg.raw.get("reply_markup") == markup:
        raise bad_request(NOT_MODIFIED)
    sim.check_flood(int(msg.chat), edit=True)
    raw = {k: v for k, v in msg.raw.items() if k != "reply_markup"}
    _set_content(raw, [], markup)
    return _replace(msg, raw)


async def delete_message(sim: TelegramSim, p: Json) -> bool:
    msg = sim.find_message(known_chat(sim, p).id, int(p.get("message_id", 0)))
    if msg is None or msg.deleted:
        raise bad_request("message to delete not found")
    msg.deleted = True
    return True


REACTIONS = frozenset((
    "👍", "👎", "❤", "🔥", "🥰", "👏", "😁", "🤔", "🤯", "😱", "🤬", "😢", "🎉", "🤩", "🤮", "💩",
    "🙏", "👌", "🕊", "🤡", "🥱", "🥴", "😍", "🐳", "❤\u200d🔥", "🌚", "🌭", "💯", "🤣", "⚡", "🍌",
    "🏆", "💔", "🤨", "😐", "🍓", "🍾", "💋", "🖕", "😈", "😴", "😭", "🤓", "👻",
    "👨\u200d💻", "👀", "🎃", "🙈", "😇", "😨", "🤝", "✍", "🤗", "🫡", "🎅", "🎄", "☃", "💅", "🤪",
    "🗿", "🆒", "💘", "🙉", "🦄", "😘", "💊", "🙊", "😎", "👾", "🤷\u200d♂", "🤷",
    "🤷\u200d♀", "😡",
))  # fmt: skip
"""The emoji a ``ReactionTypeEmoji`` may be (the Bot API's list): no ✅, no ❌."""


async def set_message_reaction(sim: TelegramSim, p: Json) -> bool:
    """The bot's reactions on a message, replaced; each call is kept in the message's
    ``raw["bot_reactions"]`` (the emoji it set, in order) for tests to read."""
    msg = sim.find_message(known_chat(sim, p).id, int(p.get("message_id", 0)))
    if msg is None or msg.deleted:
        raise bad_request("message to react not found")
    reaction = p.get("reaction") or []
    kinds = [r for r in reaction if isinstance(r, dict)] if isinstance(reaction, list) else []
    emoji = [str(r.get("emoji")) for r in kinds if r.get("type") == "emoji"]
    if len(emoji) != len(kinds) or any(e not in REACTIONS for e in emoji):
        raise bad_request("REACTION_INVALID")
    if len(emoji) > 1:
        raise bad_request("REACTIONS_TOO_MANY")  # a bot sets at most one
    msg.raw.setdefault("bot_reactions", []).append(emoji[0] if emoji else "")
    return True


async def delete_messages(sim: TelegramSim, p: Json) -> bool:
    chat = known_chat(sim, p)
    for message_id in p.get("message_ids", []):
        if (msg := sim.find_message(chat.id, int(message_id))) is not None:
            msg.deleted = True
    return True


async def answer_callback_query(sim: TelegramSim, p: Json) -> bool:
    query = sim.queries.get(str(p.get("callback_query_id", "")))
    too_old = query is None or query.answer is not None or (
        time.monotonic() - query.created > sim.callback_window
    )  # fmt: skip
    if query is None or too_old:
        raise bad_request("query is too old and response timeout expired or query ID is invalid")
    query.answer = {k: p[k] for k in ("text", "show_alert", "url", "cache_time") if k in p}
    sim.answers[query.id] = query.answer
    return True


async def send_chat_action(sim: TelegramSim, p: Json) -> bool:
    chat = known_chat(sim, p)
    if p.get("action") not in CHAT_ACTIONS:
        raise bad_request("wrong parameter action in request")
    thread = _thread(chat, p)
    sim.actions.append((chat.id, str(p["action"]), thread, time.monotonic()))
    return True


async def set_my_commands(sim: TelegramSim, p: Json) -> bool:
    commands = p.get("commands")
    if not isinstance(commands, list) or len(commands) > 100:
        raise bad_request("commands must be a list of at most 100 BotCommand")
    for c in commands:
        if not _COMMAND_NAME.fullmatch(str(c.get("command", ""))):
            raise bad_request("BOT_COMMAND_INVALID")
        if not 1 <= len(str(c.get("description", ""))) <= 256:
            raise bad_request("command description is empty")
    sim.my_commands[_scope_key(p)] = [dict(c) for c in commands]
    return True


async def get_my_commands(sim: TelegramSim, p: Json) -> list[Json]:
    return sim.my_commands.get(_scope_key(p), [])


async def delete_my_commands(sim: TelegramSim, p: Json) -> bool:
    sim.my_commands.pop(_scope_key(p), None)
    return True


async def set_webhook(sim: TelegramSim, p: Json) -> bool:
    url = str(p.get("url", ""))
    if not url:
        return await delete_webhook(sim, p)
    parsed = urlparse(url)
    loopback = parsed.scheme == "http" and parsed.hostname in ("127.0.0.1", "localhost")
    if parsed.scheme != "https" and not loopback:
        raise bad_request("bad webhook: An HTTPS URL must be provided for webhook")
    secret = p.get("secret_token")
    if secret is not None and not _SECRET.fullmatch(str(secret)):
        raise bad_request("secret token contains unallowed characters")
    _drop_pending(sim, p)
    if "allowed_updates" in p:
        sim.allowed_updates = set(p["allowed_updates"]) or sim.allowed_updates
    sim.start_webhook(Webhook(url, None if secret is None else str(secret)))
    return True


async def delete_webhook(sim: TelegramSim, p: Json) -> bool:
    _drop_pending(sim, p)
    sim.webhook = None
    return True


async def get_webhook_info(sim: TelegramSim, p: Json) -> Json:
    hook = sim.webhook
    info: Json = {"url": hook.url if hook else "", "has_custom_certificate": False,
                  "pending_update_count": len(sim.pending())}  # fmt: skip
    if hook and hook.last_error:
        info |= {"last_error_date": int(time.time()), "last_error_message": hook.last_error}
    return info


# validation -----------------------------------------------------------------------------------
def known_chat(sim: TelegramSim, p: Json) -> TgChat:
    chat_id = p.get("chat_id")
    if not isinstance(chat_id, int) or chat_id not in sim.chats:
        raise bad_request("chat not found")
    chat = sim.chats[chat_id]
    if chat.id in sim.blocked:
        gone = (
            "blocked by the user" if chat.type == "private" else f"kicked from the {chat.type} chat"
        )
        raise TgApiError(403, f"Forbidden: bot was {gone}")
    return chat


def _text(p: Json) -> tuple[str, list[Json]]:
    source = str(p.get("text", ""))
    try:
        text, entities = parse(source, p.get("parse_mode"))
    except MarkupError as exc:
        raise bad_request(f"can't parse entities: {exc}") from None
    if "entities" in p and not p.get("parse_mode"):
        entities = list(p["entities"])
    if not text.strip():
        raise bad_request("message text is empty")
    if utf16_len(text) > MAX_TEXT:
        raise bad_request("message is too long")
    return text, entities


def _caption(p: Json) -> tuple[str, list[Json]]:
    try:
        caption, entities = parse(str(p.get("caption", "")), p.get("parse_mode"))
    except MarkupError as exc:
        raise bad_request(f"can't parse entities: {exc}") from None
    if utf16_len(caption) > MAX_CAPTION:
        raise bad_request("message caption is too long")
    return caption, entities


def _inline_markup(p: Json) -> Json | None:
    """The inline keyboard to store (other keyboards are accepted but not echoed back)."""
    markup = p.get("reply_markup")
    if not isinstance(markup, dict) or "inline_keyboard" not in markup:
        return None
    for row in markup["inline_keyboard"]:
        for button in row:
            _check_button(button)
    return {"inline_keyboard": markup["inline_keyboard"]}


def _check_button(button: Json) -> None:
    if not str(button.get("text", "")):
        raise bad_request("BUTTON_TEXT_EMPTY")
    data = button.get("callback_data")
    if data is not None and not 1 <= len(str(data).encode("utf-8")) <= 64:
        raise bad_request("BUTTON_DATA_INVALID")
    actions = {"callback_data", "url", "switch_inline_query", "web_app", "login_url", "pay",
               "switch_inline_query_current_chat", "callback_game", "copy_text"}  # fmt: skip
    if not actions & button.keys():
        raise bad_request("text buttons are unallowed in the inline keyboard")


def _thread(chat: TgChat, p: Json) -> int | None:
    thread = p.get("message_thread_id")
    if thread is None:
        return None
    if chat.is_forum and thread not in chat.topics and thread != 1:
        raise bad_request("message thread not found")
    return int(thread)


def _reply_target(sim: TelegramSim, chat: TgChat, p: Json) -> SimMessage | None:
    params = p.get("reply_parameters") or {}
    message_id = params.get("message_id", p.get("reply_to_message_id"))
    if message_id is None:
        return None
    target = sim.find_message(chat.id, int(message_id))
    if target is None or target.deleted:
        if params.get("allow_sending_without_reply"):
            return None
        raise bad_request("message to be replied not found")
    return target


def _editable(sim: TelegramSim, p: Json) -> SimMessage:
    if "inline_message_id" in p:
        raise bad_request("MESSAGE_ID_INVALID")
    msg = sim.find_message(known_chat(sim, p).id, int(p.get("message_id", 0)))
    if msg is None or msg.deleted:
        raise bad_request("message to edit not found")
    if not msg.from_bot:
        raise bad_request("message can't be edited")
    return msg


def _set_content(raw: Json, entities: list[Json], markup: Json | None) -> None:
    if entities:
        raw["entities"] = entities
    if markup is not None:
        raw["reply_markup"] = markup


def _replace(msg: SimMessage, raw: Json) -> Json:
    msg.history.append(copy.deepcopy(msg.raw))
    raw["edit_date"] = int(time.time())
    msg.raw, msg.text, msg.buttons = raw, raw.get("text", ""), buttons_of(raw)
    return raw


def _scope_key(p: Json) -> tuple[str, str]:
    scope = p.get("scope") or {"type": "default"}
    key = scope["type"] if set(scope) == {"type"} else json_key(scope)
    return key, str(p.get("language_code", ""))


def json_key(value: Json) -> str:
    return ",".join(f"{k}={value[k]}" for k in sorted(value))


def _drop_pending(sim: TelegramSim, p: Json) -> None:
    if p.get("drop_pending_updates"):
        now = time.monotonic()
        for update in sim.pending():
            update.confirmed_at = now


METHODS: dict[str, Method] = {
    "getMe": get_me,
    "sendMessage": send_message,
    "sendMessageDraft": send_message_draft,
    "sendDocument": send_document,
    "sendPhoto": send_photo,
    "getFile": get_file,
    "editMessageText": edit_message_text,
    "editMessageReplyMarkup": edit_message_reply_markup,
    "deleteMessage": delete_message,
    "deleteMessages": delete_messages,
    "setMessageReaction": set_message_reaction,
    "answerCallbackQuery": answer_callback_query,
    "sendChatAction": send_chat_action,
    "setMyCommands": set_my_commands,
    "getMyCommands": get_my_commands,
    "deleteMyCommands": delete_my_commands,
    "setWebhook": set_webhook,
    "deleteWebhook": delete_webhook,
    "getWebhookInfo": get_webhook_info,
}
