"""The store's conversation tables: ``sessions``, ``messages`` and ``turns``.

A session is one conversation of a session key (open until ended); its messages are the
history, ``active`` until compaction replaces them (``docs/turn-loop.md`` §18); a turn is
one run of the loop, ``running`` until its final status is stored. Message content is
stored as given when it is a ``str`` and JSON-encoded when it is a list of blocks;
``content_is_list`` says which, so a ``str`` that happens to look like JSON comes back as
that same ``str``.

This module holds the statements and the row mapping (:mod:`core.store.statements`);
:class:`core.store.sqlite.SqliteStore` runs them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from core.store.base import SessionRecord, StoredMessage, TurnRecord
from core.store.statements import Row, Statement, insert_sql
from core.types import (
    ChatMessage,
    Content,
    ExitReason,
    Role,
    TurnStatus,
    tool_calls_from_json,
    tool_calls_to_json,
)

# sessions ------------------------------------------------------------------

SESSION_COLUMNS = ("id", "key", "profile", "created_at", "last_active_at")
_INSERT_SESSION = insert_sql("sessions", SESSION_COLUMNS)
ACTIVE_SESSION = "SELECT * FROM sessions WHERE key = ? AND ended_at IS NULL"


def create_session(record: SessionRecord) -> Statement:
    """A new session: it has no prompt yet and is open."""
    params = (record.id, record.key, record.profile, record.created_at, record.last_active_at)
    return Statement(_INSERT_SESSION, params, f"create a session for key {record.key!r}")


def end_session(session_id: str, now: float) -> Statement:
    sql = "UPDATE sessions SET ended_at = COALESCE(ended_at, ?) WHERE id = ?"
    return Statement(sql, (now, session_id), f"session {session_id!r}")


def touch_session(session_id: str, now: float) -> Statement:
    sql = "UPDATE sessions SET last_active_at = ? WHERE id = ?"
    return Statement(sql, (now, session_id), f"session {session_id!r}")


def save_session_prompt(
    session_id: str, frozen_context: str, system_prompt: str, fingerprint: str
) -> Statement:
    sql = (
        "UPDATE sessions SET frozen_context = ?, system_prompt = ?, prompt_fingerprint = ?"
        " WHERE id = ?"
    )
    params = (frozen_context, system_prompt, fingerprint, session_id)
    return Statement(sql, params, f"session {session_id!r}")


def session_from_row(row: Row) -> SessionRecord:
    return SessionRecord(
        id=row["id"],
        key=row["key"],
        profile=row["profile"],
        created_at=row["created_at"],
        last_active_at=row["last_active_at"],
        frozen_context=row["frozen_context"],
        system_prompt=row["system_prompt"],
        prompt_fingerprint=row["prompt_fingerprint"],
        ended_at=row["ended_at"],
    )


# messages ------------------------------------------------------------------

MESSAGE_COLUMNS = ("role", "content", "content_is_list", "tool_calls", "tool_call_id", "name")
_INSERT_MESSAGE = insert_sql(
    "messages", ("session_id", "turn_id", *MESSAGE_COLUMNS, "created_at", "origin")
)
ACTIVE_MESSAGES = "SELECT * FROM messages WHERE session_id = ? AND active = 1 ORDER BY id"
MESSAGE_BY_ORIGIN = (
    "SELECT * FROM messages WHERE session_id = ?1 AND (origin = ?2"
    " OR instr(char(10) || origin || char(10), char(10) || ?2 || char(10)) > 0)"
    " ORDER BY id LIMIT 1"
)
"""A message stored with ``origin`` — alone, or as one line of several (messages merged
into one turn: :func:`stored_origin`)."""


def stored_origin(origin: str | None, also: tuple[str, ...]) -> str | None:
    """The ``origin`` column of a message from ``origin`` with the updates ``also`` merged
    into it (``debounce_ms``): every one of them, one a line, so :data:`MESSAGE_BY_ORIGIN`
    finds the message by any one."""
    own = () if origin is None else (origin,)
    return "\n".join((*own, *also)) or None


def append_message(
    session_id: str,
    turn_id: str | None,
    message: ChatMessage,
    origin: str | None,
    also: tuple[str, ...],
    now: float,
) -> Statement:
    content, is_list = encode_content(message.content)
    tool_calls = tool_calls_to_json(message.tool_calls)
    params = (
        session_id, turn_id, message.role, content, is_list, tool_calls, message.tool_call_id,
        message.name, now, stored_origin(origin, also),
    )  # fmt: skip
    return Statement(_INSERT_MESSAGE, params, f"append a message to session {session_id!r}")


def update_message_content(message_id: int, content: Content) -> Statement:
    text, is_list = encode_content(content)
    sql = "UPDATE messages SET content = ?, content_is_list = ? WHERE id = ?"
    return Statement(sql, (text, is_list, message_id), f"message {message_id}")


DEACTIVATE_MESSAGES = "UPDATE messages SET active = 0 WHERE id IN (SELECT value FROM json_each(?))"


def deactivate_messages(message_ids: Sequence[int]) -> Statement:
    # One statement however many ids: atomic for readers, and no bound-variable limit.
    return Statement(DEACTIVATE_MESSAGES, (json.dumps(list(message_ids)),), "deactivate messages")


def encode_content(content: Content) -> tuple[str | None, int]:
    """``(stored text, content_is_list)`` for a message's content."""
    if isinstance(content, list):
        return json.dumps(content, ensure_ascii=False), 1
    return content, 0


def decode_content(text: str | None, is_list: int) -> Content:
    if text is not None and is_list:
        return cast(list[dict[str, Any]], json.loads(text))
    return text


def message_from_row(row: Row) -> StoredMessage:
    message = ChatMessage(
        role=cast(Role, row["role"]),
        content=decode_content(row["content"], row["content_is_list"]),
        tool_calls=tool_calls_from_json(row["tool_calls"]),
        tool_call_id=row["tool_call_id"],
        name=row["name"],
    )
    return StoredMessage(
        id=row["id"],
        session_id=row["session_id"],
        turn_id=row["turn_id"],
        message=message,
        created_at=row["created_at"],
        active=bool(row["active"]),
        origin=row["origin"],
    )


# turns ---------------------------------------------------------------------

TURN = "SELECT * FROM turns WHERE id = ?"
TURNS_OF = "SELECT * FROM turns WHERE session_id = ? ORDER BY started_at, rowid"


def start_turn(record: TurnRecord) -> Statement:
    sql = "INSERT INTO turns (id, session_id, started_at) VALUES (?, ?, ?)"
    params = (record.id, record.session_id, record.started_at)
    doing = f"start turn {record.id!r} in session {record.session_id!r}"
    return Statement(sql, params, doing)


def finish_turn(
    turn_id: str,
    status: TurnStatus,
    exit_reason: ExitReason,
    iterations: int,
    error: str | None,
    now: float,
) -> Statement:
    sql = (
        "UPDATE turns SET status = ?, exit_reason = ?, iterations = ?, error = ?,"
        " finished_at = ? WHERE id = ?"
    )
    params = (status, exit_reason, iterations, error, now, turn_id)
    return Statement(sql, params, f"turn {turn_id!r}")


def fail_running_turns(reason: str, now: float) -> Statement:
    sql = (
        "UPDATE turns SET status = 'failed', exit_reason = 'crashed', error = ?,"
        " finished_at = ? WHERE status = 'running'"
    )
    return Statement(sql, (reason, now), "fail running turns")


def turn_from_row(row: Row) -> TurnRecord:
    return TurnRecord(
        id=row["id"],
        session_id=row["session_id"],
        started_at=row["started_at"],
        status=cast(TurnStatus, row["status"]),
        finished_at=row["finished_at"],
        exit_reason=cast("ExitReason | None", row["exit_reason"]),
        iterations=row["iterations"],
        error=row["error"],
    )
