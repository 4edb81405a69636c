"""The store's ``tool_calls`` and ``approvals`` tables.

A tool call is recorded whole when it has already ended, or opened as it begins (usually
``requested``), moved on (``awaiting_approval``, ``started``) and finished with its result,
so a crash leaves a row saying how far it got (``docs/turn-loop.md`` §5). An approval is
``pending`` until resolved once: resolving is a compare-and-set (``UPDATE ... WHERE state =
'pending'``) whose row count says who won; the card that shows it is stored once it was
sent (docs/architecture.md §8).

This module holds the statements and the row mapping (:mod:`core.store.statements`);
:class:`core.store.sqlite.SqliteStore` runs them.
"""

from __future__ import annotations

from typing import cast

from core.store.base import ApprovalCard, ApprovalRecord, ToolCallRecord, ToolCallStatus
from core.store.statements import Query, Row, Statement, insert_sql
from core.types import ApprovalState

# tool calls ----------------------------------------------------------------

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
"""What :func:`finish_tool_call` writes when an open call ends."""
_INSERT_TOOL_CALL = insert_sql("tool_calls", TOOL_CALL_COLUMNS)
_FINISH_TOOL_CALL = (
    f"UPDATE tool_calls SET {', '.join(f'{c} = ?' for c in TOOL_CALL_END_COLUMNS)} WHERE seq = ?"
)
TOOL_CALLS_OF = "SELECT * FROM tool_calls WHERE turn_id = ? ORDER BY seq"


def insert_tool_call(record: ToolCallRecord, doing: str) -> Statement:
    """A tool call's row, recorded whole or opened (``doing`` says which)."""
    doing = f"{doing} tool call {record.call_id!r} of turn {record.turn_id!r}"
    return Statement(_INSERT_TOOL_CALL, tool_call_params(record), doing)


def set_tool_call_status(seq: int, status: ToolCallStatus, approval_id: str | None) -> Statement:
    sql = "UPDATE tool_calls SET status = ?, approval_id = COALESCE(?, approval_id) WHERE seq = ?"
    return Statement(sql, (status, approval_id, seq), f"tool call #{seq}")


def finish_tool_call(seq: int, record: ToolCallRecord) -> Statement:
    params = (*tool_call_end_params(record), seq)
    return Statement(_FINISH_TOOL_CALL, params, f"tool call #{seq}")


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


def tool_call_from_row(row: Row) -> ToolCallRecord:
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


# approvals -----------------------------------------------------------------

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
_INSERT_APPROVAL = insert_sql("approvals", APPROVAL_COLUMNS)
APPROVAL = "SELECT * FROM approvals WHERE id = ?"


def create_approval(record: ApprovalRecord) -> Statement:
    doing = f"create approval {record.id!r} for turn {record.turn_id!r}"
    return Statement(_INSERT_APPROVAL, approval_params(record), doing)


def resolve_approval(
    approval_id: str, state: ApprovalState, resolved_by: str | None, now: float
) -> Statement:
    """The compare-and-set: it changes a row only while the approval is still pending."""
    if state == "pending":
        raise ValueError("an approval cannot be resolved to 'pending'")
    sql = (
        "UPDATE approvals SET state = ?, resolved_by = ?, resolved_at = ?"
        " WHERE id = ? AND state = 'pending'"
    )
    params = (state, resolved_by, now, approval_id)
    return Statement(sql, params, f"resolve approval {approval_id!r}")


def set_approval_card(approval_id: str, card: ApprovalCard) -> Statement:
    sql = (
        "UPDATE approvals SET card_platform = ?, card_chat_id = ?, card_thread_id = ?,"
        " card_message_id = ? WHERE id = ?"
    )
    params = (card.platform, card.chat_id, card.thread_id, card.message_id, approval_id)
    return Statement(sql, params, f"approval {approval_id!r}")


def pending_approvals(session_key: str | None) -> Query:
    """The pending approvals, oldest first: all of them, or those of one session key."""
    sql = "SELECT * FROM approvals WHERE state = 'pending'"
    params: tuple[object, ...] = ()
    if session_key is not None:
        sql, params = sql + " AND session_key = ?", (session_key,)
    return sql + " ORDER BY requested_at, rowid", params


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


def approval_from_row(row: Row) -> ApprovalRecord:
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


def card_from_row(row: Row) -> ApprovalCard | None:
    """The card location, when one was stored (platform and message id are both set)."""
    if row["card_platform"] is None or row["card_message_id"] is None:
        return None
    return ApprovalCard(
        platform=row["card_platform"],
        chat_id=row["card_chat_id"],
        thread_id=row["card_thread_id"],
        message_id=row["card_message_id"],
    )
