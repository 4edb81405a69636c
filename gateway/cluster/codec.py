"""JSON for what crosses between gateway processes: inbound events, outbound calls, outcomes.

A process forwards an inbound event to the process running its session, and relays an
outbound call to the process owning its bot, which mails the outcome back (docs/cluster.md;
the mail itself is :mod:`gateway.cluster.mailbox`). This module turns those values into
text and back, losing nothing that the other side needs:

- an :class:`InboundEvent` whole (session key, sender, chat, messages, attachments), but
  not its ``receipt``: a receipt is the receiving process's own, so a decoded event gets a
  fresh one;
- every call of :mod:`adapters.calls`, with its ``priority`` and ``coalesce`` key (the
  owner's scheduler folds waiting calls of one key into the newest: a streamed answer's
  ``("stream", chat)``, a chat's ``("typing", platform, chat_id)``). Keys made of strings,
  numbers, booleans, tuples, chats and messages travel as they are; any other key cannot
  mean the same thing in another process and travels as None (the call is then never
  folded, only made);
- a :class:`SendFile`'s bytes (base64; the owner has no access to this process's
  workspace): the decoder writes them to the spool directory its caller gives and the
  decoded call points there;
- an outcome: the ``SentMessage`` or None a call returned, or the error of the
  :mod:`adapters.base` tree it raised, which the decoder raises again as the same class
  with the same message (a :class:`RateLimited` keeps ``retry_after`` and ``final``, so the
  requester's scheduler neither retries what the owner's gave up on, nor waits less).

Text is JSON with ``ensure_ascii``: any Python string, lone surrogates included, comes back
equal, and the payload is plain ASCII (a PostgreSQL ``TEXT`` column takes it as it is).
Text that is not ours (bad JSON, an unknown kind, a missing field) raises one
``ValueError`` naming what was wrong.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any

from adapters.base import (
    AdapterError,
    BadMarkup,
    Button,
    ButtonRows,
    ChatRef,
    DownloadFailed,
    Forbidden,
    InboundEvent,
    MessageGone,
    NotModified,
    RateLimited,
    Sender,
    SentMessage,
    SessionKey,
    StreamRefused,
    TooLong,
)
from adapters.calls import (
    AnswerPress,
    Call,
    Delete,
    Edit,
    LiveText,
    Priority,
    React,
    Send,
    SendFile,
    Typing,
)
from core.attachments import Attachment, OutgoingFile

Json = dict[str, Any]

ERRORS: dict[str, type[AdapterError]] = {
    cls.__name__: cls
    for cls in (
        AdapterError,
        RateLimited,
        MessageGone,
        NotModified,
        TooLong,
        Forbidden,
        BadMarkup,
        StreamRefused,
        DownloadFailed,
    )
}
"""The error tree that crosses processes; a subclass of it travels as its nearest one."""


# text <-> JSON ----------------------------------------------------------------------------
def _dump(value: Json) -> str:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def _load(text: str, what: str) -> Json:
    try:
        value = json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{what}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what}: expected a JSON object, got {type(value).__name__}")
    return value


def _field(data: Mapping[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    if name not in data:
        raise ValueError(f"{what}: missing field {name!r}")
    value = data[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ValueError(f"{what}: field {name!r} has the wrong type ({type(value).__name__})")
    return value


def _object(data: Mapping[str, Any], name: str, what: str) -> Json:
    value: Json = _field(data, name, dict, what)
    return value


def _optional_str(data: Mapping[str, Any], name: str, what: str) -> str | None:
    if data.get(name) is None:
        return None
    value: str = _field(data, name, str, what)
    return value


# small values -----------------------------------------------------------------------------
def _chat(chat: ChatRef) -> Json:
    return {"platform": chat.platform, "chat_id": chat.chat_id, "thread_id": chat.thread_id}


def _chat_of(data: Json, what: str = "chat") -> ChatRef:
    return ChatRef(
        _field(data, "platform", str, what),
        _field(data, "chat_id", str, what),
        _optional_str(data, "thread_id", what),
    )


def _message(message: SentMessage) -> Json:
    return {"chat": _chat(message.chat), "message_id": message.message_id}


def _message_of(data: Json, what: str = "message") -> SentMessage:
    return SentMessage(_chat_of(_object(data, "chat", what)), _field(data, "message_id", str, what))


def _optional_message(data: Json, name: str, what: str) -> SentMessage | None:
    return None if data.get(name) is None else _message_of(_object(data, name, what), name)


def _buttons(rows: ButtonRows) -> list[list[Json]]:
    return [[{"label": b.label, "data": b.data, "role": b.role} for b in row] for row in rows]


def _buttons_of(data: Json, what: str) -> tuple[tuple[Button, ...], ...]:
    rows = _field(data, "buttons", list, what)
    try:
        return tuple(tuple(Button(b["label"], b["data"], b["role"]) for b in row) for row in rows)
    except (TypeError, KeyError) as exc:
        raise ValueError(f"{what}: malformed buttons ({exc!r})") from None


def _priority_of(data: Json, what: str) -> Priority:
    value = _field(data, "priority", int, what)
    try:
        return Priority(value)
    except ValueError:
        raise ValueError(f"{what}: unknown priority {value}") from None


# coalesce keys ----------------------------------------------------------------------------
class _Unportable(Exception):
    """A coalesce key with a part that means nothing in another process."""


def _key(value: Hashable | None) -> Any:
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, tuple):
        return {"tuple": [_key(part) for part in value]}
    if isinstance(value, ChatRef):
        return {"chat": _chat(value)}
    if isinstance(value, SentMessage):
        return {"message": _message(value)}
    raise _Unportable


def _coalesce(value: Hashable | None) -> Any:
    try:
        return _key(value)
    except _Unportable:
        return None  # an object key (identity) cannot be the same key elsewhere: not folded


def _key_of(value: Any, what: str) -> Hashable | None:
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, dict) and len(value) == 1:
        [(tag, inner)] = value.items()
        if tag == "tuple" and isinstance(inner, list):
            return tuple(_key_of(part, what) for part in inner)
        if tag == "chat" and isinstance(inner, dict):
            return _chat_of(inner, f"{what} coalesce")
        if tag == "message" and isinstance(inner, dict):
            return _message_of(inner, f"{what} coalesce")
    raise ValueError(f"{what}: malformed coalesce key {value!r}")


# events -----------------------------------------------------------------------------------
def _attachment(a: Attachment) -> Json:
    return {
        "kind": a.kind, "name": a.name, "mime": a.mime, "size": a.size, "source": a.source,
        "sha256": a.sha256, "path": a.path, "transcript": a.transcript,
    }  # fmt: skip


def _attachment_of(data: Any) -> Attachment:
    what = "attachment"
    if not isinstance(data, dict):
        raise ValueError(f"{what}: expected an object")
    return Attachment(
        kind=_field(data, "kind", str, what),
        name=_field(data, "name", str, what),
        mime=_field(data, "mime", str, what),
        size=_field(data, "size", int, what),
        source=_field(data, "source", str, what),
        sha256=_field(data, "sha256", str, what),
        path=_field(data, "path", str, what),
        transcript=_optional_str(data, "transcript", what),
    )


def _event(event: InboundEvent) -> Json:
    key, sender = event.session_key, event.sender
    return {
        "kind": event.kind, "platform": event.platform, "update_id": event.update_id,
        "chat": _chat(event.chat), "chat_type": event.chat_type,
        "sender": {"id": sender.id, "name": sender.name, "is_bot": sender.is_bot},
        "session_key": {
            "platform": key.platform, "chat_type": key.chat_type, "chat_id": key.chat_id,
            "thread_id": key.thread_id, "user_id": key.user_id,
        },
        "text": event.text, "command": event.command, "args": event.args,
        "button_data": event.button_data,
        "message": _message(event.message) if event.message else None,
        "press_id": event.press_id, "mentioned": event.mentioned,
        "reply_to_bot": event.reply_to_bot,
        "attachments": [_attachment(a) for a in event.attachments],
        "stream_id": event.stream_id,
        "source": _message(event.source) if event.source else None,
    }  # fmt: skip


def _event_of(data: Json) -> InboundEvent:
    what = "event"
    sender, key = _object(data, "sender", what), _object(data, "session_key", what)
    return InboundEvent(
        kind=_field(data, "kind", str, what),
        platform=_field(data, "platform", str, what),
        update_id=_field(data, "update_id", str, what),
        chat=_chat_of(_object(data, "chat", what)),
        chat_type=_field(data, "chat_type", str, what),
        sender=Sender(
            _field(sender, "id", str, "sender"),
            _field(sender, "name", str, "sender"),
            _field(sender, "is_bot", bool, "sender"),
        ),
        session_key=SessionKey(
            _field(key, "platform", str, "session key"),
            _field(key, "chat_type", str, "session key"),
            _field(key, "chat_id", str, "session key"),
            _optional_str(key, "thread_id", "session key"),
            _optional_str(key, "user_id", "session key"),
        ),
        text=_field(data, "text", str, what),
        command=_optional_str(data, "command", what),
        args=_field(data, "args", str, what),
        button_data=_optional_str(data, "button_data", what),
        message=_optional_message(data, "message", what),
        press_id=_optional_str(data, "press_id", what),
        mentioned=_field(data, "mentioned", bool, what),
        reply_to_bot=_field(data, "reply_to_bot", bool, what),
        attachments=tuple(_attachment_of(a) for a in _field(data, "attachments", list, what)),
        stream_id=_optional_str(data, "stream_id", what),
        source=_optional_message(data, "source", what),
    )


def encode_event(event: InboundEvent) -> str:
    """``event`` as JSON text (its receipt stays here)."""
    return _dump(_event(event))


def decode_event(text: str) -> InboundEvent:
    """The event ``encode_event`` wrote, with a fresh receipt; ValueError if it is not one."""
    return _event_of(_load(text, "event"))


# calls ------------------------------------------------------------------------------------
def _file_bytes(file: OutgoingFile) -> str:
    try:
        data = Path(file.path).read_bytes()
    except OSError as exc:
        raise AdapterError(f"cannot read {file.name} to relay it: {exc.strerror}") from None
    return base64.b64encode(data).decode("ascii")


def _outgoing(file: OutgoingFile) -> Json:
    return {
        "key": file.key, "name": file.name, "mime": file.mime, "size": file.size,
        "kind": file.kind, "caption": file.caption, "bytes": _file_bytes(file),
    }  # fmt: skip


def _outgoing_of(data: Json, spool: Path | None) -> OutgoingFile:
    what = "file"
    if spool is None:
        raise ValueError("send_file: a relayed file needs a spool directory to land in")
    try:
        content = base64.b64decode(_field(data, "bytes", str, what), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"{what}: its bytes are not base64 ({exc})") from None
    spool.mkdir(parents=True, exist_ok=True)
    path = spool / f"relayed-{secrets.token_hex(8)}"
    path.write_bytes(content)
    return OutgoingFile(
        key=_field(data, "key", str, what),
        path=str(path),
        name=_field(data, "name", str, what),
        mime=_field(data, "mime", str, what),
        size=_field(data, "size", int, what),
        kind=_field(data, "kind", str, what),
        caption=_field(data, "caption", str, what),
    )


def _call(call: Call) -> Json:
    body: Json
    match call:
        case Send():
            body = {
                "kind": "send", "chat": _chat(call.chat), "text": call.text,
                "buttons": _buttons(call.buttons), "markup": call.markup, "key": call.key,
                "in_flight_since": call.in_flight_since,
            }  # fmt: skip
        case SendFile():
            body = {
                "kind": "send_file", "chat": _chat(call.chat), "file": _outgoing(call.file),
                "caption": call.caption, "key": call.key,
                "in_flight_since": call.in_flight_since,
            }  # fmt: skip
        case Edit():
            body = {
                "kind": "edit", "message": _message(call.message), "text": call.text,
                "buttons": _buttons(call.buttons), "markup": call.markup,
            }  # fmt: skip
        case Delete():
            body = {"kind": "delete", "message": _message(call.message)}
        case AnswerPress():
            body = {"kind": "answer_press", "event": _event(call.event), "text": call.text}
        case Typing():
            body = {"kind": "typing", "chat": _chat(call.chat)}
        case LiveText():
            body = {"kind": "live_text", "chat": _chat(call.chat), "text": call.text}
            body["mode"] = call.mode
        case React():
            body = {"kind": "react", "message": _message(call.message), "emoji": call.emoji}
    body["priority"] = int(call.priority)
    body["coalesce"] = _coalesce(call.coalesce)
    return body


def _in_flight(data: Json, what: str) -> float | None:
    value = data.get("in_flight_since")
    return None if value is None else float(_field(data, "in_flight_since", (int, float), what))


def _send_of(data: Json, spool: Path | None) -> Call:
    return Send(
        _chat_of(_object(data, "chat", "send")),
        _field(data, "text", str, "send"),
        _buttons_of(data, "send"),
        _field(data, "markup", bool, "send"),
        _optional_str(data, "key", "send"),
        _in_flight(data, "send"),
    )


def _send_file_of(data: Json, spool: Path | None) -> Call:
    return SendFile(
        _chat_of(_object(data, "chat", "send_file")),
        _outgoing_of(_object(data, "file", "send_file"), spool),
        _field(data, "caption", str, "send_file"),
        _optional_str(data, "key", "send_file"),
        _in_flight(data, "send_file"),
    )


def _edit_of(data: Json, spool: Path | None) -> Call:
    return Edit(
        _message_of(_object(data, "message", "edit")),
        _field(data, "text", str, "edit"),
        _buttons_of(data, "edit"),
        _field(data, "markup", bool, "edit"),
    )


def _delete_of(data: Json, spool: Path | None) -> Call:
    return Delete(_message_of(_object(data, "message", "delete")))


def _answer_of(data: Json, spool: Path | None) -> Call:
    event = _event_of(_object(data, "event", "answer_press"))
    return AnswerPress(event, _optional_str(data, "text", "answer_press"))


def _typing_of(data: Json, spool: Path | None) -> Call:
    return Typing(_chat_of(_object(data, "chat", "typing")))


def _live_of(data: Json, spool: Path | None) -> Call:
    mode = _field(data, "mode", str, "live_text")
    if mode not in ("append", "replace", "seal"):
        raise ValueError(f"live_text: unknown mode {mode!r}")
    return LiveText(
        _chat_of(_object(data, "chat", "live_text")), _field(data, "text", str, "live_text"), mode
    )


def _react_of(data: Json, spool: Path | None) -> Call:
    return React(
        _message_of(_object(data, "message", "react")), _field(data, "emoji", str, "react")
    )


CALLS: dict[str, Callable[[Json, Path | None], Call]] = {
    "send": _send_of,
    "send_file": _send_file_of,
    "edit": _edit_of,
    "delete": _delete_of,
    "answer_press": _answer_of,
    "typing": _typing_of,
    "live_text": _live_of,
    "react": _react_of,
}


def encode_call(call: Call) -> str:
    """``call`` as JSON text; a ``SendFile`` reads its file (AdapterError if it cannot)."""
    return _dump(_call(call))


def decode_call(text: str, spool: Path | None = None) -> Call:
    """The call ``encode_call`` wrote. A ``SendFile``'s bytes are written to a new file in
    ``spool`` (the caller removes it once the call is made); ValueError if not a call."""
    data = _load(text, "call")
    kind = _field(data, "kind", str, "call")
    decode = CALLS.get(kind)
    if decode is None:
        raise ValueError(f"call: unknown kind {kind!r}")
    call = decode(data, spool)
    priority = _priority_of(data, kind)
    coalesce = _key_of(data.get("coalesce"), kind)
    return type(call)(**{**_fields(call), "priority": priority, "coalesce": coalesce})


def _fields(call: Call) -> dict[str, Any]:
    return {name: getattr(call, name) for name in call.__dataclass_fields__}


# outcomes ---------------------------------------------------------------------------------
def _error_class(exc: AdapterError) -> str:
    for cls in type(exc).__mro__:
        if cls.__name__ in ERRORS and ERRORS[cls.__name__] is cls:
            return cls.__name__
    return "AdapterError"  # pragma: no cover - every AdapterError has AdapterError in its MRO


def encode_outcome(result: SentMessage | AdapterError | None) -> str:
    """What a call came to: the message it sent, None, or the error it raised."""
    if isinstance(result, AdapterError):
        error: Json = {"class": _error_class(result), "message": str(result)}
        if isinstance(result, RateLimited):
            error |= {"retry_after": result.retry_after, "final": result.final}
        return _dump({"error": error})
    return _dump({"sent": _message(result) if result is not None else None})


def decode_outcome(text: str) -> SentMessage | None:
    """The result ``encode_outcome`` wrote, or its error raised again (same class, same
    message); ValueError if the text is not an outcome."""
    data = _load(text, "outcome")
    if "error" in data:
        raise _error_of(_object(data, "error", "outcome"))
    if "sent" not in data:
        raise ValueError("outcome: neither 'sent' nor 'error'")
    return _optional_message(data, "sent", "outcome")


def _error_of(data: Json) -> AdapterError:
    name = _field(data, "class", str, "error")
    message = _field(data, "message", str, "error")
    cls = ERRORS.get(name)
    if cls is None:
        raise ValueError(f"error: unknown class {name!r}")
    if cls is RateLimited:
        limited = RateLimited(float(_field(data, "retry_after", (int, float), "error")))
        limited.args = (message,)  # the message as the owner's error said it, whole
        limited.final = bool(data.get("final", False))
        return limited
    return cls(message)
