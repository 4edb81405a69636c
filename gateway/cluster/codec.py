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
from dataclasses import fields
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
Kind = type | tuple[type, ...]
Spec = tuple[tuple[str, Kind], ...]
"""The plain fields of a value: name and JSON type(s), checked when decoding."""

OPTIONAL: Kind = (str, type(None))
CHAT: Spec = (("platform", str), ("chat_id", str), ("thread_id", OPTIONAL))
SENDER: Spec = (("id", str), ("name", str), ("is_bot", bool))
SESSION_KEY: Spec = (
    ("platform", str), ("chat_type", str), ("chat_id", str), ("thread_id", OPTIONAL),
    ("user_id", OPTIONAL),
)  # fmt: skip
ATTACHMENT: Spec = (
    ("kind", str), ("name", str), ("mime", str), ("size", int), ("source", str),
    ("sha256", str), ("path", str), ("transcript", OPTIONAL),
)  # fmt: skip
BUTTON: Spec = (("label", str), ("data", str), ("role", str))
FILE: Spec = (
    ("key", str),
    ("name", str),
    ("mime", str),
    ("size", int),
    ("kind", str),
    ("caption", str),
)
EVENT: Spec = (
    ("kind", str), ("platform", str), ("update_id", str), ("chat_type", str), ("text", str),
    ("command", OPTIONAL), ("args", str), ("button_data", OPTIONAL), ("press_id", OPTIONAL),
    ("mentioned", bool), ("reply_to_bot", bool), ("stream_id", OPTIONAL),
)  # fmt: skip
CALL_FIELDS: dict[str, Kind] = {
    "text": str, "markup": bool, "key": OPTIONAL, "in_flight_since": (int, float, type(None)),
    "caption": str, "mode": str, "emoji": str,
}  # fmt: skip
"""The plain fields of the calls (an ``AnswerPress``'s ``text`` may be None: below)."""
LIVE_MODES = ("append", "replace", "seal")

CALLS: dict[str, type[Call]] = {
    "send": Send, "send_file": SendFile, "edit": Edit, "delete": Delete,
    "answer_press": AnswerPress, "typing": Typing, "live_text": LiveText, "react": React,
}  # fmt: skip
CALL_KINDS = {cls: kind for kind, cls in CALLS.items()}

ERRORS: dict[str, type[AdapterError]] = {
    cls.__name__: cls
    for cls in (
        AdapterError, RateLimited, MessageGone, NotModified, TooLong, Forbidden, BadMarkup,
        StreamRefused, DownloadFailed,
    )
}  # fmt: skip
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


def _field(data: Mapping[str, Any], name: str, kind: Kind, what: str) -> Any:
    if name not in data:
        raise ValueError(f"{what}: missing field {name!r}")
    value = data[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ValueError(f"{what}: field {name!r} has the wrong type ({type(value).__name__})")
    return value


def _object(data: Mapping[str, Any], name: str, what: str) -> Json:
    value: Json = _field(data, name, dict, what)
    return value


def _flat(value: object, spec: Spec) -> Json:
    return {name: getattr(value, name) for name, _ in spec}


def _values(data: Any, spec: Spec, what: str) -> Json:
    if not isinstance(data, dict):
        raise ValueError(f"{what}: expected an object, got {type(data).__name__}")
    return {name: _field(data, name, kind, what) for name, kind in spec}


# small values -----------------------------------------------------------------------------
def _chat(chat: ChatRef) -> Json:
    return _flat(chat, CHAT)


def _chat_of(data: Any, what: str = "chat") -> ChatRef:
    return ChatRef(**_values(data, CHAT, what))


def _message(message: SentMessage | None) -> Json | None:
    return None if message is None else {"chat": _chat(message.chat), "id": message.message_id}


def _message_of(data: Any, what: str = "message") -> SentMessage:
    values = _values(data, (("chat", dict), ("id", str)), what)
    return SentMessage(_chat_of(values["chat"]), values["id"])


def _optional_message(data: Json, name: str, what: str) -> SentMessage | None:
    return None if data.get(name) is None else _message_of(_object(data, name, what), name)


def _buttons(rows: ButtonRows) -> list[list[Json]]:
    return [[_flat(button, BUTTON) for button in row] for row in rows]


def _buttons_of(data: Json, what: str) -> tuple[tuple[Button, ...], ...]:
    rows = _field(data, "buttons", list, what)
    if not all(isinstance(row, list) for row in rows):
        raise ValueError(f"{what}: buttons must be rows (lists)")
    return tuple(tuple(Button(**_values(b, BUTTON, "button")) for b in row) for row in rows)


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
        if tag == "chat":
            return _chat_of(inner, f"{what} coalesce")
        if tag == "message":
            return _message_of(inner, f"{what} coalesce")
    raise ValueError(f"{what}: malformed coalesce key {value!r}")


# events -----------------------------------------------------------------------------------
def _event(event: InboundEvent) -> Json:
    return _flat(event, EVENT) | {
        "chat": _chat(event.chat),
        "sender": _flat(event.sender, SENDER),
        "session_key": _flat(event.session_key, SESSION_KEY),
        "message": _message(event.message),
        "attachments": [_flat(a, ATTACHMENT) for a in event.attachments],
        "source": _message(event.source),
    }


def _event_of(data: Json) -> InboundEvent:
    what = "event"
    return InboundEvent(
        **_values(data, EVENT, what),
        chat=_chat_of(_object(data, "chat", what)),
        sender=Sender(**_values(_object(data, "sender", what), SENDER, "sender")),
        session_key=SessionKey(
            **_values(_object(data, "session_key", what), SESSION_KEY, "session key")
        ),
        message=_optional_message(data, "message", what),
        attachments=tuple(
            Attachment(**_values(a, ATTACHMENT, "attachment"))
            for a in _field(data, "attachments", list, what)
        ),
        source=_optional_message(data, "source", what),
    )


def encode_event(event: InboundEvent) -> str:
    """``event`` as JSON text (its receipt stays here)."""
    return _dump(_event(event))


def decode_event(text: str) -> InboundEvent:
    """The event ``encode_event`` wrote, with a fresh receipt; ValueError if it is not one."""
    return _event_of(_load(text, "event"))


# calls ------------------------------------------------------------------------------------
def _outgoing(file: OutgoingFile) -> Json:
    try:
        data = Path(file.path).read_bytes()
    except OSError as exc:
        raise AdapterError(f"cannot read {file.name} to relay it: {exc.strerror}") from None
    return _flat(file, FILE) | {"bytes": base64.b64encode(data).decode("ascii")}


def _outgoing_of(data: Json, spool: Path | None) -> OutgoingFile:
    values = _values(data, FILE, "file")
    if spool is None:
        raise ValueError("send_file: a relayed file needs a spool directory to land in")
    try:
        content = base64.b64decode(_field(data, "bytes", str, "file"), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"file: its bytes are not base64 ({exc})") from None
    spool.mkdir(parents=True, exist_ok=True)
    path = spool / f"relayed-{secrets.token_hex(8)}"
    path.write_bytes(content)
    return OutgoingFile(path=str(path), **values)


ENCODERS: dict[str, Callable[[Any], Any]] = {
    "chat": _chat, "message": _message, "event": _event, "file": _outgoing,
    "buttons": _buttons, "priority": int, "coalesce": _coalesce,
}  # fmt: skip


def encode_call(call: Call) -> str:
    """``call`` as JSON text; a ``SendFile`` reads its file (AdapterError if it cannot)."""
    body: Json = {"kind": CALL_KINDS[type(call)]}
    for f in fields(call):
        value = getattr(call, f.name)
        body[f.name] = ENCODERS[f.name](value) if f.name in ENCODERS else value
    return _dump(body)


def decode_call(text: str, spool: Path | None = None) -> Call:
    """The call ``encode_call`` wrote. A ``SendFile``'s bytes are written to a new file in
    ``spool`` (the caller removes it once the call is made); ValueError if not a call."""
    data = _load(text, "call")
    kind = _field(data, "kind", str, "call")
    cls = CALLS.get(kind)
    if cls is None:
        raise ValueError(f"call: unknown kind {kind!r}")
    names = sorted((f.name for f in fields(cls)), key=lambda name: name == "file")
    values = {name: _call_field(cls, name, data, kind, spool) for name in names}  # file last
    return cls(**values)


def _call_field(cls: type[Call], name: str, data: Json, kind: str, spool: Path | None) -> Any:
    match name:
        case "chat":
            return _chat_of(_object(data, name, kind))
        case "message":
            return _message_of(_object(data, name, kind))
        case "event":
            return _event_of(_object(data, name, kind))
        case "file":
            return _outgoing_of(_object(data, name, kind), spool)
        case "buttons":
            return _buttons_of(data, kind)
        case "priority":
            return _priority_of(data, kind)
        case "coalesce":
            return _key_of(data.get(name), kind)
    value = _field(data, name, OPTIONAL if cls is AnswerPress else CALL_FIELDS[name], kind)
    if name == "mode" and value not in LIVE_MODES:
        raise ValueError(f"{kind}: unknown mode {value!r}")
    return value


# outcomes ---------------------------------------------------------------------------------
def _error_class(exc: AdapterError) -> str:
    return next(c.__name__ for c in type(exc).__mro__ if ERRORS.get(c.__name__) is c)


def encode_outcome(result: SentMessage | AdapterError | None) -> str:
    """What a call came to: the message it sent, None, or the error it raised."""
    if isinstance(result, AdapterError):
        error: Json = {"class": _error_class(result), "message": str(result)}
        if isinstance(result, RateLimited):
            error |= {"retry_after": result.retry_after, "final": result.final}
        return _dump({"error": error})
    return _dump({"sent": _message(result)})


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
        limited = RateLimited(_field(data, "retry_after", (int, float), "error"))
        limited.args = (message,)  # the message as the owner's error said it, whole
        limited.final = _field(data, "final", bool, "error")
        return limited
    return cls(message)
