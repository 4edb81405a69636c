"""Mapping between SQLite rows and the store's records.

Kept apart from the SQL so each side reads on its own. Booleans are stored as 0/1, times as
REAL UNIX seconds. Message content is stored as given when it is a ``str`` and JSON-encoded
when it is a list of blocks; ``content_is_list`` says which, so a ``str`` that happens to
look like JSON comes back as that same ``str``.

Every text written goes through :func:`storable` first: a lone surrogate (which SQLite's
UTF-8 encoding refuses) becomes U+FFFD, so odd input is stored, never a crashed write.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from core.store.base import (
    ApprovalCard,
    ApprovalRecord,
    DeadLetter,
    InboundRecord,
    InboundState,
    OutboxChunk,
    SessionRecord,
    StoredMessage,
    ToolCallRecord,
    ToolCallStatus,
    TurnRecord,
)
from core.text import valid_text
from core.types import (
    ApprovalState,
    ChatMessage,
    Content,
    ExitReason,
    Role,
    TurnStatus,
    tool_calls_from_json,
    tool_calls_to_json,
)


def storable(params: Sequence[object]) -> tuple[object, ...]:
    """Statement parameters with every ``str`` made encodable (lone surrogates → U+FFFD)."""
    return tuple(valid_text(p) if isinstance(p, str) else p for p in params)


SESSION_COLUMNS = ("id", "key", "profile", "created_at", "last_active_at")


def session_params(record: SessionRecord) -> tuple[object, ...]:
    """Values for :data:`SESSION_COLUMNS` (a new session has no prompt and is open)."""
    return record.id, record.key, record.profile, record.created_at, record.last_active_at


def session_from_row(row: sqlite3.Row) -> SessionRecord:
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


def encode_content(content: Content) -> tuple[str | None, int]:
    """``(stored text, content_is_list)`` for a message's content."""
    if isinstance(content, list):
        return json.dumps(content, ensure_ascii=False), 1
    return content, 0


def decode_content(text: str | None, is_list: int) -> Content:
    if text is not None and is_list:
        return cast(list[dict[str, Any]], json.loads(text))
    return text


MESSAGE_COLUMNS = ("role", "content", "content_is_list", "tool_calls", "tool_call_id", "name")


def message_params(message: ChatMessage) -> tuple[object, ...]:
    """Values for :data:`MESSAGE_COLUMNS`."""
    content, is_list = encode_content(message.content)
    tool_calls = tool_calls_to_json(message.tool_calls)
    return message.role, content, is_list, tool_calls, message.tool_call_id, message.name


def message_from_row(row: sqlite3.Row) -> StoredMessage:
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


def turn_from_row(row: sqlite3.Row) -> TurnRecord:
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


TOOL_CALL_COLUMNS = (
    "call_id",
    "turn_id",
    "session_id",
    "name",
    "arguments",
    "result",
    "is_error",
    "started_at",
    "finished_at",
    "approval_id",
    "approval_outcome",
    "status",
)

TOOL_CALL_END_COLUMNS = (
    "arguments",
    "result",
    "is_error",
    "finished_at",
    "approval_id",
    "approval_outcome",
    "status",
)
"""What :meth:`SqliteStore.finish_tool_call` writes when an open call ends."""


def tool_call_end_params(record: ToolCallRecord) -> tuple[object, ...]:
    return (
        record.arguments,
        record.result,
        int(record.is_error),
        record.finished_at,
        record.approval_id,
        record.approval_outcome,
        record.status,
    )


def tool_call_params(record: ToolCallRecord) -> tuple[object, ...]:
    return (
        record.call_id,
        record.turn_id,
        record.session_id,
        record.name,
        record.arguments,
        record.result,
        int(record.is_error),
        record.started_at,
        record.finished_at,
        record.approval_id,
        record.approval_outcome,
        record.status,
    )


def tool_call_from_row(row: sqlite3.Row) -> ToolCallRecord:
    return ToolCallRecord(
        call_id=row["call_id"],
        turn_id=row["turn_id"],
        session_id=row["session_id"],
        name=row["name"],
        arguments=row["arguments"],
        result=row["result"],
        is_error=bool(row["is_error"]),
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        approval_id=row["approval_id"],
        approval_outcome=cast("ApprovalState | None", row["approval_outcome"]),
        status=cast(ToolCallStatus, row["status"]),
    )


APPROVAL_COLUMNS = (
    "id",
    "session_id",
    "session_key",
    "turn_id",
    "tool",
    "arguments",
    "prompt",
    "state",
    "requested_by",
    "resolved_by",
    "requested_at",
    "resolved_at",
)


def approval_params(record: ApprovalRecord) -> tuple[object, ...]:
    return (
        record.id,
        record.session_id,
        record.session_key,
        record.turn_id,
        record.tool,
        record.arguments,
        record.prompt,
        record.state,
        record.requested_by,
        record.resolved_by,
        record.requested_at,
        record.resolved_at,
    )


def approval_from_row(row: sqlite3.Row) -> ApprovalRecord:
    return ApprovalRecord(
        id=row["id"],
        session_id=row["session_id"],
        session_key=row["session_key"],
        turn_id=row["turn_id"],
        tool=row["tool"],
        arguments=row["arguments"],
        prompt=row["prompt"],
        requested_at=row["requested_at"],
        state=cast(ApprovalState, row["state"]),
        requested_by=row["requested_by"],
        resolved_by=row["resolved_by"],
        resolved_at=row["resolved_at"],
        card=card_from_row(row),
    )


def card_from_row(row: sqlite3.Row) -> ApprovalCard | None:
    """The card location, when one was stored (platform and message id are both set)."""
    if row["card_platform"] is None or row["card_message_id"] is None:
        return None
    return ApprovalCard(
        platform=row["card_platform"],
        chat_id=row["card_chat_id"],
        thread_id=row["card_thread_id"],
        message_id=row["card_message_id"],
    )


INBOUND_COLUMNS = ("platform", "update_id", "session_key", "payload", "state", "received_at")


def inbound_params(record: InboundRecord) -> tuple[object, ...]:
    return (
        record.platform,
        record.update_id,
        record.session_key,
        record.payload,
        record.state,
        record.received_at,
    )


def inbound_from_row(row: sqlite3.Row) -> InboundRecord:
    return InboundRecord(
        platform=row["platform"],
        update_id=row["update_id"],
        session_key=row["session_key"],
        payload=row["payload"],
        received_at=row["received_at"],
        state=cast(InboundState, row["state"]),
    )


DEAD_LETTER_COLUMNS = ("platform", "item_id", "raw", "error", "attempts", "created_at")


def dead_letter_params(letter: DeadLetter) -> tuple[object, ...]:
    """Values for :data:`DEAD_LETTER_COLUMNS` (the id is the store's to assign)."""
    return (
        letter.platform,
        letter.item_id,
        letter.raw,
        letter.error,
        letter.attempts,
        letter.created_at,
    )


def dead_letter_from_row(row: sqlite3.Row) -> DeadLetter:
    return DeadLetter(
        platform=row["platform"],
        item_id=row["item_id"],
        raw=row["raw"],
        error=row["error"],
        attempts=row["attempts"],
        created_at=row["created_at"],
        id=row["id"],
    )


OUTBOX_COLUMNS = (
    "turn_id", "chunk", "platform", "chat_id", "thread_id", "text", "markup", "created_at",
)  # fmt: skip


def outbox_params(chunk: OutboxChunk, now: float) -> tuple[object, ...]:
    return (
        chunk.turn_id,
        chunk.index,
        chunk.platform,
        chunk.chat_id,
        chunk.thread_id,
        chunk.text,
        int(chunk.markup),
        now,
    )


def outbox_as_stored(chunk: OutboxChunk) -> OutboxChunk:
    """``chunk`` as a fresh row reads back: its texts made storable, not sent yet."""
    return replace(
        chunk,
        turn_id=valid_text(chunk.turn_id),
        platform=valid_text(chunk.platform),
        chat_id=valid_text(chunk.chat_id),
        thread_id=None if chunk.thread_id is None else valid_text(chunk.thread_id),
        text=valid_text(chunk.text),
        message_id=None,
        started_at=None,
    )


def outbox_from_row(row: sqlite3.Row) -> OutboxChunk:
    return OutboxChunk(
        turn_id=row["turn_id"],
        index=row["chunk"],
        platform=row["platform"],
        chat_id=row["chat_id"],
        thread_id=row["thread_id"],
        text=row["text"],
        markup=bool(row["markup"]),
        message_id=row["message_id"],
        started_at=row["started_at"],
    )
