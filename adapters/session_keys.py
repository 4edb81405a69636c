"""Session key strategy: which conversation an inbound message belongs to.

Adapters build every update's key with a :class:`SessionKeyRule`; :func:`session_key` is
the rule, and :func:`key_rule` fixes a configured :class:`KeyStrategy` into one. The rules
(``docs/architecture.md`` §7):

* a direct message → one session per chat (``telegram:dm:<chat>``);
* a group or channel → one session per user in that chat (``per_user``, the default,
  ``telegram:group:<chat>:<user>``) or one shared by everyone (``shared``);
* a thread or forum topic → one session shared by its members
  (``telegram:thread:<chat>:<topic>``, ``slack:channel:<channel>:<thread_ts>``).

Two messages with the same key never run turns at the same time (the Dispatcher's rule),
so the strategy decides what may run in parallel.

A key is stored as its string (``str(key)``); :func:`parse_session_key` is the one way
back, used wherever a key comes back from the store (and cached: a key is parsed once
however often its string comes back). A child agent's session
(``<parent key>/child:<turn>:<call>``) parses as its parent's key: it lives in the same
chat.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Literal, Protocol

from adapters.base import ChatType, SessionKey

CHAT_TYPES: tuple[ChatType, ...] = ("dm", "group", "channel", "thread")
CHILD_MARK = "/child:"
_CHAT_TYPE_OF: dict[str, ChatType] = {chat_type: chat_type for chat_type in CHAT_TYPES}
PARSED_KEYS = 4096
"""Key strings whose :class:`SessionKey` is kept (the most recently parsed)."""

GroupSessions = Literal["per_user", "shared"]


@dataclass(frozen=True, slots=True)
class KeyStrategy:
    """Per-platform configuration (``group_sessions`` in the platform's section)."""

    group: GroupSessions = "per_user"


class SessionKeyRule(Protocol):
    """Build the session key of one message from where it was said and by whom."""

    def __call__(
        self,
        platform: str,
        chat_type: ChatType,
        chat_id: str,
        *,
        user_id: str | None,
        thread_id: str | None = None,
    ) -> SessionKey: ...


def session_key(
    platform: str,
    chat_type: ChatType,
    chat_id: str,
    *,
    user_id: str | None,
    thread_id: str | None = None,
    strategy: KeyStrategy = KeyStrategy(),
) -> SessionKey:
    """The session key of a message; ``thread_id`` set means a thread shared by its members."""
    if chat_type == "dm":
        return SessionKey(platform, "dm", chat_id)
    if thread_id is not None or chat_type == "thread":
        return SessionKey(platform, "thread", chat_id, thread_id=thread_id)
    if strategy.group == "shared" or user_id is None:
        return SessionKey(platform, chat_type, chat_id)
    return SessionKey(platform, chat_type, chat_id, user_id=user_id)


def key_rule(strategy: KeyStrategy) -> SessionKeyRule:
    """:func:`session_key` with ``strategy`` fixed: what an adapter is given as its rule."""
    rule: SessionKeyRule = partial(session_key, strategy=strategy)
    return rule


@lru_cache(maxsize=PARSED_KEYS)
def parse_session_key(text: str) -> SessionKey:
    """The :class:`SessionKey` whose ``str()`` is ``text`` (ValueError if none is).

    ``<platform>:<type>:<chat>``, then for a thread its ``:<thread>`` and for a per-user
    group or channel key its ``:<user>``.
    """
    parts = text.split(CHILD_MARK, 1)[0].split(":")
    if len(parts) not in (3, 4) or not all(parts) or parts[1] not in CHAT_TYPES:
        raise ValueError(f"not a session key: {text!r}")
    platform, chat_type, chat_id = parts[0], _CHAT_TYPE_OF[parts[1]], parts[2]
    rest = parts[3] if len(parts) == 4 else None
    if chat_type == "thread":
        return SessionKey(platform, chat_type, chat_id, thread_id=rest)
    if chat_type == "dm" and rest is not None:
        raise ValueError(f"not a session key: {text!r}")
    return SessionKey(platform, chat_type, chat_id, user_id=rest)
