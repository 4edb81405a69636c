"""A conversation's history from the store, for a page opened after a restart.

What a person saw: their own messages and the agent's final replies (tool calls, tool
results and system text are left out), oldest first, as feed messages. A turn's reply has
the feed id of its first chunk (``c-<outbox key>``) and its ``turn``: the adapter shows a
chunk sent again after a restart once (docs/architecture.md, "Exactly once").
"""

from __future__ import annotations

import logging

from adapters.web.feed import Json
from adapters.web.render import markdown_html, plain_html
from core.store.base import Store, StoredMessage, chunk_key

_log = logging.getLogger(__name__)


async def load_history(store: Store, session_key: str) -> list[Json]:
    """The open session's visible messages; empty when there is none (or on a store error)."""
    try:
        found = await store.load_active_session(session_key)
        if found is None:
            return []
        stored = found.messages
    except Exception:
        _log.exception("web: history of %s could not be loaded", session_key)
        return []
    shown = [(message, item) for message in stored if (item := _shown(message)) is not None]
    last_bot = {m.turn_id: m.id for m, item in shown if item["role"] == "bot" and m.turn_id}
    return [
        _as_reply(item, m.turn_id) if m.turn_id and last_bot.get(m.turn_id) == m.id else item
        for m, item in shown
    ]


def _as_reply(item: Json, turn: str) -> Json:
    """A turn's last bot message is its reply: it takes the id of the reply's first chunk
    and names its turn, so a chunk of it sent again after a restart is not shown twice."""
    return {**item, "id": chunk_message_id(chunk_key(turn, 0)), "turn": turn}


def chunk_message_id(key: str) -> str:
    """The feed id of a reply chunk: its outbox key, the same in every run."""
    return f"c-{key}"


def _shown(stored: StoredMessage) -> Json | None:
    message = stored.message
    text = message.text().strip()
    if not text:
        return None
    if message.role == "user":
        return {"id": f"h-{stored.id}", "role": "user", "html": plain_html(text)}
    if message.role == "assistant" and not message.tool_calls:
        html = markdown_html(text)
        return {"id": f"h-{stored.id}", "role": "bot", "html": html, "markup": True, "buttons": []}
    return None
