"""A conversation's history from the store, for a page opened after a restart.

What a person saw: their own messages and the agent's final replies (tool calls, tool
results and system text are left out), oldest first, as feed messages.
"""

from __future__ import annotations

import logging

from adapters.web.feed import Json
from adapters.web.render import markdown_html, plain_html
from core.store.base import Store, StoredMessage

_log = logging.getLogger(__name__)


async def load_history(store: Store, session_key: str) -> list[Json]:
    """The open session's visible messages; empty when there is none (or on a store error)."""
    try:
        session = await store.get_active_session(session_key)
        if session is None:
            return []
        stored = await store.load_active_messages(session.id)
    except Exception:
        _log.exception("web: history of %s could not be loaded", session_key)
        return []
    return [shown for message in stored if (shown := _shown(message)) is not None]


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
