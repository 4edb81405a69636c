"""Session key strategy: which conversation an inbound message belongs to.

Adapters build every update's key with a :class:`SessionKeyRule`; :func:`session_key` is
the rule, and :func:`key_rule` fixes a configured :class:`KeyStrategy` into one. The rules
(DESIGN.md, "Session keys"):

* a direct message → one session per chat (``telegram:dm:<chat>``);
* a group or channel → one session per user in that chat (``per_user``, the default,
  ``telegram:group:<chat>:<user>``) or one shared by everyone (``shared``);
* a thread or forum topic → one session shared by its members
  (``telegram:thread:<chat>:<topic>``, ``slack:channel:<channel>:<thread_ts>``).

Two messages with the same key never run turns at the same time (the Dispatcher's rule),
so the strategy decides what may run in parallel. This lives in ``adapters/`` because
adapters may not import ``gateway/``; the gateway re-exports it (``gateway.session_keys``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Literal, Protocol

from adapters.base import ChatType, SessionKey

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
        return SessionKey(platform, chat_type, chat_id, thread_id=thread_id)
    if strategy.group == "shared" or user_id is None:
        return SessionKey(platform, chat_type, chat_id)
    return SessionKey(platform, chat_type, chat_id, user_id=user_id)


def key_rule(strategy: KeyStrategy) -> SessionKeyRule:
    """:func:`session_key` with ``strategy`` fixed: what an adapter is given as its rule."""
    rule: SessionKeyRule = partial(session_key, strategy=strategy)
    return rule
