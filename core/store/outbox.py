"""The store's ``outbox`` table: each reply chunk, stored before it is sent.

A turn's chunks are stored together, keyed by ``(turn_id, chunk)`` (``INSERT ... ON
CONFLICT DO NOTHING``: stored once, a second store of them reads the first back); a chunk
is marked started just before its send and sent once the platform has it, so a restart
knows which were in flight (docs/architecture.md, "Exactly once").

This module holds the statements and the row mapping (:mod:`core.store.statements`);
:class:`core.store.sqlite.SqliteStore` runs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from core.store.base import OutboxChunk
from core.store.statements import Row, Statement

OUTBOX_COLUMNS = (
    "turn_id", "chunk", "platform", "chat_id", "thread_id", "text", "markup", "created_at",
)  # fmt: skip
CHUNKS_OF = "SELECT * FROM outbox WHERE turn_id = ? ORDER BY chunk"


def put_outbox(chunks: Sequence[OutboxChunk], now: float) -> Statement:
    """One statement for all of a turn's chunks; its row count says how many were new."""
    values = ", ".join(f"({', '.join('?' for _ in OUTBOX_COLUMNS)})" for _ in chunks)
    params = tuple(v for c in chunks for v in outbox_params(c, now))
    sql = (
        f"INSERT INTO outbox ({', '.join(OUTBOX_COLUMNS)}) VALUES {values}"
        " ON CONFLICT (turn_id, chunk) DO NOTHING"
    )
    return Statement(sql, params, f"store the reply of turn {chunks[0].turn_id}")


def mark_outbox_started(turn_id: str, index: int, now: float) -> Statement:
    # The first start is kept: a lookup after a crash searches from it.
    sql = "UPDATE outbox SET started_at = COALESCE(started_at, ?) WHERE turn_id = ? AND chunk = ?"
    return Statement(sql, (now, turn_id, index), f"outbox chunk {index} of turn {turn_id}")


def mark_outbox_sent(turn_id: str, index: int, message_id: str, now: float) -> Statement:
    sql = "UPDATE outbox SET message_id = ?, sent_at = ? WHERE turn_id = ? AND chunk = ?"
    params = (message_id, now, turn_id, index)
    return Statement(sql, params, f"outbox chunk {index} of turn {turn_id}")


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
    """``chunk`` as a fresh row reads back: not sent yet."""
    return replace(chunk, message_id=None, started_at=None)


def outbox_from_row(row: Row) -> OutboxChunk:
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
