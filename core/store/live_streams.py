"""The store's ``live_streams`` table (SQLite migration 10, PostgreSQL 3): per session key,
the message its streamed answer is being written into (:class:`StreamRecord`), from the
stream's first send until its answer is delivered or the stream cleared
(:mod:`gateway.turns.streaming`). A row left by a killed process is the cut message the turn
run again after the restart takes over (docs/architecture.md §13).

This module holds the statements and the row mapping (:mod:`core.store.statements`);
:class:`core.store.sqlite.SqliteStore` and :class:`core.store.postgres.PgStore` run them.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.store.records import StreamRecord
from core.store.statements import Row, Statement

STREAM_OF = "SELECT * FROM live_streams WHERE session_key = ?"
PUT_STREAM = (
    "INSERT INTO live_streams (session_key, platform, chat_id, thread_id, message_id, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_key) DO UPDATE SET"
    " platform = excluded.platform, chat_id = excluded.chat_id,"
    " thread_id = excluded.thread_id, message_id = excluded.message_id,"
    " created_at = excluded.created_at"
)
DROP_STREAM = "DELETE FROM live_streams WHERE session_key = ? AND message_id = ?"


def put_stream(record: StreamRecord, now: float) -> Statement:
    """Keep ``record`` (replacing the session's earlier one)."""
    params = (
        record.session_key, record.platform, record.chat_id, record.thread_id,
        record.message_id, now,
    )  # fmt: skip
    return Statement(PUT_STREAM, params, f"keep the stream of {record.session_key}")


def drop_stream(session_key: str, message_id: str) -> Statement:
    """Forget the session's record when it still names ``message_id`` (a newer one stays)."""
    params = (session_key, message_id)
    return Statement(DROP_STREAM, params, f"forget the stream of {session_key}")


def stream_from_rows(rows: Sequence[Row]) -> StreamRecord | None:
    if not rows:
        return None
    row = rows[0]
    return StreamRecord(
        session_key=row["session_key"],
        platform=row["platform"],
        chat_id=row["chat_id"],
        thread_id=row["thread_id"],
        message_id=row["message_id"],
    )
