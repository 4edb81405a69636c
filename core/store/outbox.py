"""The store's ``outbox`` table: each reply chunk, stored before it is sent.

A turn's chunks are stored together, keyed by ``(turn_id, chunk)`` (``INSERT ... ON
CONFLICT DO NOTHING``: stored once, a second store of them reads the first back); a chunk
is marked started just before its send and sent once the platform has it, so a restart
knows which were in flight (docs/architecture.md, "Exactly once").

This module holds the statements and the row mapping (:mod:`core.store.statements`);
:class:`core.store.sqlite.SqliteStore` runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from core.store.base import OutboxChunk
from core.store.statements import Row, Statement

OUTBOX_COLUMNS = (
    "turn_id", "chunk", "platform", "chat_id", "thread_id", "text", "markup", "created_at",
)  # fmt: skip
CHUNKS_OF = "SELECT * FROM outbox WHERE turn_id = ? ORDER BY chunk"


_ROW = f"({', '.join('?' for _ in OUTBOX_COLUMNS)})"
"""One chunk's placeholders."""


def put_outbox(chunks: Sequence[OutboxChunk], now: float) -> Statement:
    """One statement for all of a turn's chunks (its parameters: :data:`OUTBOX_COLUMNS` of
    each chunk in turn); its row count says how many were new."""
    params: list[object] = []
    for c in chunks:
        params += (
            c.turn_id,
            c.index,
            c.platform,
            c.chat_id,
            c.thread_id,
            c.text,
            int(c.markup),
            now,
        )
    sql = (
        f"INSERT INTO outbox ({', '.join(OUTBOX_COLUMNS)}) VALUES {', '.join([_ROW] * len(chunks))}"
        " ON CONFLICT (turn_id, chunk) DO NOTHING"
    )
    return Statement(sql, tuple(params), f"store the reply of turn {chunks[0].turn_id}")


def mark_outbox_started(turn_id: str, index: int, now: float) -> Statement:
    # The first start is kept: a lookup after a crash searches from it.
    sql = "UPDATE outbox SET started_at = COALESCE(started_at, ?) WHERE turn_id = ? AND chunk = ?"
    return Statement(sql, (now, turn_id, index), f"outbox chunk {index} of turn {turn_id}")


def mark_outbox_sent(turn_id: str, index: int, message_id: str, now: float) -> Statement:
    sql = "UPDATE outbox SET message_id = ?, sent_at = ? WHERE turn_id = ? AND chunk = ?"
    params = (message_id, now, turn_id, index)
    return Statement(sql, params, f"outbox chunk {index} of turn {turn_id}")


as_stored: Callable[[OutboxChunk], OutboxChunk] = partial(replace, message_id=None, started_at=None)
"""A chunk as its fresh row reads back: not sent yet (a partial: no frame per chunk)."""


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
