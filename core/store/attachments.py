"""The store's two file tables (migration 8): ``attachments`` and ``queued_files``.

``attachments`` holds the files of each inbound message, one row per ``(origin, idx)``
(docs/attachments.md): written ``downloading`` before the first byte is fetched and
``saved`` once the file is in the session's workspace, so a replayed update finds its files
and downloads none again; ``message_id`` links the row to the stored user message.
``queued_files`` is the outbox for files the agent sends (``send_file``): a row per file
key, marked started just before each upload and sent once it arrived (or failed for good).

This module holds the statements and the row mapping (:mod:`core.store.statements`);
:class:`core.store.sqlite.SqliteStore` runs them.
"""

from __future__ import annotations

from typing import cast

from core.attachments import Attachment, AttachmentKind, OutgoingFile, OutgoingKind
from core.store.base import AttachmentRecord, AttachmentState, QueuedFile
from core.store.statements import Row, Statement

# attachments ---------------------------------------------------------------

_ATTACHMENT_COLUMNS = (
    "origin",
    "idx",
    "session_key",
    "kind",
    "name",
    "mime",
    "size",
    "sha256",
    "path",
    "source",
    "transcript",
    "state",
    "error",
    "message_id",
    "created_at",
)
_ATTACHMENT_UPDATED = [c for c in _ATTACHMENT_COLUMNS if c not in ("origin", "idx", "created_at")]
_PUT_ATTACHMENT = (
    f"INSERT INTO attachments ({', '.join(_ATTACHMENT_COLUMNS)})"
    f" VALUES ({', '.join('?' for _ in _ATTACHMENT_COLUMNS)})"
    " ON CONFLICT (origin, idx) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _ATTACHMENT_UPDATED if c != "message_id")
    # A rewrite (e.g. saved after downloading) keeps a link made before it.
    + ", message_id = COALESCE(excluded.message_id, attachments.message_id)"
)
ATTACHMENTS_OF = "SELECT * FROM attachments WHERE origin = ? ORDER BY idx"


def put_attachment(record: AttachmentRecord, now: float) -> Statement:
    a = record.attachment
    params = (
        record.origin,
        record.index,
        record.session_key,
        a.kind,
        a.name,
        a.mime,
        a.size,
        a.sha256,
        a.path,
        a.source,
        a.transcript,
        record.state,
        record.error,
        record.message_id,
        now,
    )
    return Statement(_PUT_ATTACHMENT, params, f"store file {record.index} of {record.origin}")


def link_attachments(origin: str, message_id: int) -> Statement:
    sql = "UPDATE attachments SET message_id = ? WHERE origin = ?"
    return Statement(sql, (message_id, origin), f"link the files of {origin} to its message")


def attachment_from_row(row: Row) -> AttachmentRecord:
    attachment = Attachment(
        kind=cast(AttachmentKind, row["kind"]),
        name=row["name"],
        mime=row["mime"],
        size=row["size"],
        source=row["source"],
        sha256=row["sha256"],
        path=row["path"],
        transcript=row["transcript"],
    )
    return AttachmentRecord(
        origin=row["origin"],
        index=row["idx"],
        session_key=row["session_key"],
        attachment=attachment,
        state=cast(AttachmentState, row["state"]),
        error=row["error"],
        message_id=row["message_id"],
    )


# queued files (the outbox for files) ----------------------------------------

_QUEUED_FILE_COLUMNS = (
    "key",
    "session_id",
    "turn_id",
    "platform",
    "chat_id",
    "thread_id",
    "path",
    "name",
    "mime",
    "size",
    "kind",
    "caption",
    "queued_at",
)
_QUEUE_FILE = (
    f"INSERT INTO queued_files ({', '.join(_QUEUED_FILE_COLUMNS)})"
    f" VALUES ({', '.join('?' for _ in _QUEUED_FILE_COLUMNS)})"
    " ON CONFLICT (key) DO NOTHING"
)
UNSENT_FILES = (
    "SELECT * FROM queued_files WHERE session_id = ? AND message_id IS NULL AND failed = ''"
    " ORDER BY queued_at, rowid"
)
UNSENT_SESSIONS = (
    "SELECT DISTINCT sessions.key FROM queued_files JOIN sessions"
    " ON sessions.id = queued_files.session_id"
    " WHERE queued_files.message_id IS NULL AND queued_files.failed = ''"
)
"""The keys of the sessions holding files not yet arrived nor given up (read at start-up)."""


def queue_file(queued: QueuedFile) -> Statement:
    f = queued.file
    params = (
        f.key,
        queued.session_id,
        queued.turn_id,
        queued.platform,
        queued.chat_id,
        queued.thread_id,
        f.path,
        f.name,
        f.mime,
        f.size,
        f.kind,
        f.caption,
        queued.queued_at,
    )
    return Statement(_QUEUE_FILE, params, f"queue file {f.key} of turn {queued.turn_id}")


def mark_file_started(key: str, now: float) -> Statement:
    # The first start is kept: a lookup after a crash searches from it.
    sql = "UPDATE queued_files SET started_at = COALESCE(started_at, ?) WHERE key = ?"
    return Statement(sql, (now, key), f"queued file {key}")


def mark_file_sent(key: str, message_id: str, now: float) -> Statement:
    sql = "UPDATE queued_files SET message_id = ?, sent_at = ? WHERE key = ?"
    return Statement(sql, (message_id, now, key), f"queued file {key}")


def mark_file_failed(key: str, reason: str) -> Statement:
    sql = "UPDATE queued_files SET failed = ? WHERE key = ?"
    return Statement(sql, (reason or "refused", key), f"queued file {key}")


def queued_file_from_row(row: Row) -> QueuedFile:
    file = OutgoingFile(
        key=row["key"],
        path=row["path"],
        name=row["name"],
        mime=row["mime"],
        size=row["size"],
        kind=cast(OutgoingKind, row["kind"]),
        caption=row["caption"],
    )
    return QueuedFile(
        session_id=row["session_id"],
        turn_id=row["turn_id"],
        platform=row["platform"],
        chat_id=row["chat_id"],
        thread_id=row["thread_id"],
        file=file,
        queued_at=row["queued_at"],
        message_id=row["message_id"],
        started_at=row["started_at"],
        failed=row["failed"],
    )
