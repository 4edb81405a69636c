"""Ordered, versioned schema migrations for the SQLite store.

The ``schema_version`` table holds one row per applied migration; the schema's version is
the highest of them. On open the store reads that version *before* changing anything, so
a file written by newer code is refused untouched. Each pending migration then runs in its
own transaction together with its ``schema_version`` row: a crash mid-migration leaves the
file at the previous version, never in between.

To change the schema, append a ``Migration`` with the next version. Never edit one that has
shipped: files in the field have already applied it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aiosqlite

from core.store.base import StoreError
from core.store.memory_tables import SQLITE_TABLES as MEMORY_TABLES
from core.store.usage import SQLITE_TABLES as USAGE_TABLES

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


INITIAL_SCHEMA = Migration(
    version=1,
    name="initial schema",
    statements=(
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            key TEXT NOT NULL,
            profile TEXT NOT NULL,
            created_at REAL NOT NULL,
            last_active_at REAL NOT NULL,
            frozen_context TEXT,
            system_prompt TEXT,
            prompt_fingerprint TEXT,
            ended_at REAL
        )""",
        # At most one open session per key; ended sessions stay for history.
        "CREATE UNIQUE INDEX sessions_open_by_key ON sessions (key) WHERE ended_at IS NULL",
        """CREATE TABLE turns (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id),
            started_at REAL NOT NULL,
            finished_at REAL,
            status TEXT NOT NULL DEFAULT 'running',
            exit_reason TEXT,
            iterations INTEGER NOT NULL DEFAULT 0,
            error TEXT
        )""",
        "CREATE INDEX turns_by_session ON turns (session_id, started_at)",
        "CREATE INDEX turns_running ON turns (status) WHERE status = 'running'",
        # ``id`` orders the conversation; AUTOINCREMENT never reuses an id.
        # ``content_is_list`` tells JSON-encoded list content from a str that looks like JSON.
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions (id),
            turn_id TEXT REFERENCES turns (id),
            role TEXT NOT NULL,
            content TEXT,
            content_is_list INTEGER NOT NULL DEFAULT 0,
            tool_calls TEXT,
            tool_call_id TEXT,
            name TEXT,
            created_at REAL NOT NULL,
            active INTEGER NOT NULL DEFAULT 1
        )""",
        "CREATE INDEX messages_by_session ON messages (session_id, active, id)",
        # The model's call ids are not guaranteed unique, so rows get their own ``seq``.
        """CREATE TABLE tool_calls (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            call_id TEXT NOT NULL,
            turn_id TEXT NOT NULL REFERENCES turns (id),
            session_id TEXT NOT NULL REFERENCES sessions (id),
            name TEXT NOT NULL,
            arguments TEXT NOT NULL,
            result TEXT NOT NULL,
            is_error INTEGER NOT NULL,
            started_at REAL NOT NULL,
            finished_at REAL NOT NULL,
            approval_id TEXT,
            approval_outcome TEXT
        )""",
        "CREATE INDEX tool_calls_by_turn ON tool_calls (turn_id, seq)",
        """CREATE TABLE approvals (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id),
            session_key TEXT NOT NULL,
            turn_id TEXT NOT NULL REFERENCES turns (id),
            tool TEXT NOT NULL,
            arguments TEXT NOT NULL,
            prompt TEXT NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending',
            requested_by TEXT,
            resolved_by TEXT,
            requested_at REAL NOT NULL,
            resolved_at REAL
        )""",
        "CREATE INDEX approvals_pending ON approvals (requested_at) WHERE state = 'pending'",
        """CREATE INDEX approvals_pending_by_key ON approvals (session_key, requested_at)
            WHERE state = 'pending'""",
        """CREATE TABLE inbound (
            platform TEXT NOT NULL,
            update_id TEXT NOT NULL,
            session_key TEXT NOT NULL,
            payload TEXT NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending',
            received_at REAL NOT NULL,
            PRIMARY KEY (platform, update_id)
        )""",
        """CREATE INDEX inbound_unfinished ON inbound (platform, received_at)
            WHERE state IN ('pending', 'processing')""",
    ),
)

MESSAGE_ORIGIN_AND_CARDS = Migration(
    version=2,
    name="message origin and approval card location",
    statements=(
        # The inbound update a user message came from: a replayed update reuses it.
        "ALTER TABLE messages ADD COLUMN origin TEXT",
        "CREATE INDEX messages_by_origin ON messages (session_id, origin)",
        # Where the approval's card was shown, so a restart can retire it.
        "ALTER TABLE approvals ADD COLUMN card_platform TEXT",
        "ALTER TABLE approvals ADD COLUMN card_chat_id TEXT",
        "ALTER TABLE approvals ADD COLUMN card_thread_id TEXT",
        "ALTER TABLE approvals ADD COLUMN card_message_id TEXT",
    ),
)

DEAD_LETTERS = Migration(
    version=3,
    name="dead letters",
    statements=(
        # Inbound items that could not be taken in (unreadable, or refused by the store
        # after bounded attempts): kept with their raw form and the error, once per item.
        """CREATE TABLE dead_letters (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            platform TEXT NOT NULL,
            item_id TEXT NOT NULL,
            raw TEXT NOT NULL,
            error TEXT NOT NULL,
            attempts INTEGER NOT NULL,
            created_at REAL NOT NULL,
            UNIQUE (platform, item_id)
        )""",
    ),
)

TOOL_CALL_STATUS = Migration(
    version=4,
    name="tool call status",
    statements=(
        # A call is recorded when it is asked for and its status follows it (requested ->
        # awaiting_approval -> started -> finished | blocked | denied | timed_out |
        # cancelled), so after a crash the record says how far it got. An open row has no
        # result and no finish time yet: the table is rebuilt with both optional. Rows
        # written before were all written when their call had ended: ``finished``.
        """CREATE TABLE tool_calls_v4 (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            call_id TEXT NOT NULL,
            turn_id TEXT NOT NULL REFERENCES turns (id),
            session_id TEXT NOT NULL REFERENCES sessions (id),
            name TEXT NOT NULL,
            arguments TEXT NOT NULL,
            result TEXT NOT NULL DEFAULT '',
            is_error INTEGER NOT NULL DEFAULT 0,
            started_at REAL NOT NULL,
            finished_at REAL,
            approval_id TEXT,
            approval_outcome TEXT,
            status TEXT NOT NULL DEFAULT 'finished'
        )""",
        """INSERT INTO tool_calls_v4 (seq, call_id, turn_id, session_id, name, arguments,
            result, is_error, started_at, finished_at, approval_id, approval_outcome, status)
            SELECT seq, call_id, turn_id, session_id, name, arguments, result, is_error,
            started_at, finished_at, approval_id, approval_outcome, 'finished'
            FROM tool_calls""",
        "DROP TABLE tool_calls",
        "ALTER TABLE tool_calls_v4 RENAME TO tool_calls",
        "CREATE INDEX tool_calls_by_turn ON tool_calls (turn_id, seq)",
    ),
)

OUTBOX = Migration(
    version=5,
    name="outbox",
    statements=(
        # Each chunk of a turn's reply is stored before it is sent and marked with the
        # platform's message id after: a restart sends the unsent ones, never the sent.
        """CREATE TABLE outbox (
            turn_id TEXT NOT NULL,
            chunk INTEGER NOT NULL,
            platform TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            thread_id TEXT,
            text TEXT NOT NULL,
            markup INTEGER NOT NULL,
            message_id TEXT,
            created_at REAL NOT NULL,
            sent_at REAL,
            PRIMARY KEY (turn_id, chunk)
        )""",
    ),
)

OUTBOX_STARTED = Migration(
    version=6,
    name="outbox send started",
    statements=(
        # When a send of the chunk began (written just before the platform call): a chunk
        # started but without a message id was in flight when the process stopped.
        "ALTER TABLE outbox ADD COLUMN started_at REAL",
    ),
)

COMMAND_SYNCS = Migration(
    version=7,
    name="command syncs",
    statements=(
        # The digest of the command set a platform last registered, per scope (a guild, or
        # "global"), so a restart with the same set registers nothing. Earlier versions kept
        # it as "done" inbound rows of the pseudo-platform 'discord-commands', update id
        # "<scope>:<digest>"; the latest of each scope moves here and the rows leave the
        # inbound queue.
        """CREATE TABLE command_syncs (
            platform TEXT NOT NULL,
            scope TEXT NOT NULL,
            digest TEXT NOT NULL,
            synced_at REAL NOT NULL,
            PRIMARY KEY (platform, scope)
        )""",
        """INSERT INTO command_syncs (platform, scope, digest, synced_at)
            SELECT 'discord', substr(update_id, 1, instr(update_id, ':') - 1),
            substr(update_id, instr(update_id, ':') + 1), MAX(received_at)
            FROM inbound WHERE platform = 'discord-commands' AND instr(update_id, ':') > 1
            GROUP BY substr(update_id, 1, instr(update_id, ':') - 1)""",
        "DELETE FROM inbound WHERE platform = 'discord-commands'",
    ),
)

ATTACHMENTS_AND_FILES = Migration(
    version=8,
    name="attachments and queued files",
    statements=(
        # The files of each inbound message (origin, idx): written 'downloading' before the
        # first byte and 'saved' once in the workspace, so a replayed update downloads
        # nothing again; ``message_id`` links them to the stored user message.
        """CREATE TABLE attachments (
            origin TEXT NOT NULL,
            idx INTEGER NOT NULL,
            session_key TEXT NOT NULL,
            kind TEXT NOT NULL,
            name TEXT NOT NULL,
            mime TEXT NOT NULL,
            size INTEGER NOT NULL,
            sha256 TEXT NOT NULL DEFAULT '',
            path TEXT NOT NULL DEFAULT '',
            source TEXT NOT NULL DEFAULT '',
            transcript TEXT,
            state TEXT NOT NULL,
            error TEXT NOT NULL DEFAULT '',
            message_id INTEGER,
            created_at REAL NOT NULL,
            UNIQUE (origin, idx)
        )""",
        # The files the agent sends (send_file), kept until they arrived: the outbox for
        # files. ``started_at`` just before an upload, ``message_id`` once it arrived,
        # ``failed`` (the reason) when the platform refused it for good.
        """CREATE TABLE queued_files (
            key TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            turn_id TEXT NOT NULL,
            platform TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            thread_id TEXT,
            path TEXT NOT NULL,
            name TEXT NOT NULL,
            mime TEXT NOT NULL,
            size INTEGER NOT NULL,
            kind TEXT NOT NULL,
            caption TEXT NOT NULL DEFAULT '',
            queued_at REAL NOT NULL,
            started_at REAL,
            message_id TEXT,
            sent_at REAL,
            failed TEXT NOT NULL DEFAULT ''
        )""",
        """CREATE INDEX queued_files_unsent ON queued_files (session_id, queued_at)
            WHERE message_id IS NULL AND failed = ''""",
    ),
)

PAIRING_SETTINGS_AND_LINKS = Migration(
    version=9,
    name="pairing, per-session settings and identity links",
    statements=(
        # A stranger's one-time code, by its sha256 (never the code): one per user on a
        # platform (UNIQUE: a new code replaces the old one, INSERT OR REPLACE).
        """CREATE TABLE pairing_codes (
            code_hash TEXT PRIMARY KEY,
            platform TEXT NOT NULL,
            user_id TEXT NOT NULL,
            name TEXT NOT NULL DEFAULT '',
            chat_id TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            UNIQUE (platform, user_id)
        )""",
        # Users an owner let in from the chat; ``announced`` once they were told.
        """CREATE TABLE paired_users (
            platform TEXT NOT NULL,
            user_id TEXT NOT NULL,
            name TEXT NOT NULL DEFAULT '',
            paired_at REAL NOT NULL,
            paired_by TEXT NOT NULL,
            announced INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (platform, user_id)
        )""",
        # What a chat set for its session key; NULL: the profile's own.
        """CREATE TABLE session_settings (
            session_key TEXT PRIMARY KEY,
            model TEXT,
            busy TEXT,
            progress TEXT,
            verbose INTEGER,
            updated_at REAL NOT NULL
        )""",
        # Which person each (platform, user id) is: their DMs are one session.
        """CREATE TABLE identity_links (
            platform TEXT NOT NULL,
            user_id TEXT NOT NULL,
            person TEXT NOT NULL,
            linked_at REAL NOT NULL,
            PRIMARY KEY (platform, user_id)
        )""",
        "CREATE INDEX identity_links_person ON identity_links (person)",
        # A short-lived /link code, by its sha256; one per identity.
        """CREATE TABLE link_codes (
            code_hash TEXT PRIMARY KEY,
            platform TEXT NOT NULL,
            user_id TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            UNIQUE (platform, user_id)
        )""",
    ),
)

LIVE_STREAMS = Migration(
    version=10,
    name="live streams",
    statements=(
        # The message a session's streamed answer is being written into, until the answer
        # is delivered: one left by a killed process is taken over after the restart.
        """CREATE TABLE live_streams (
            session_key TEXT PRIMARY KEY,
            platform TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            thread_id TEXT,
            message_id TEXT NOT NULL,
            created_at REAL NOT NULL
        )""",
    ),
)

MEMORY = Migration(
    version=12,
    name="memory entries (FTS5) and memory settings",
    statements=MEMORY_TABLES,  # core/store/memory_tables.py
)

SCHEDULED_TURNS = Migration(
    version=11,
    name="scheduled turns",
    statements=(
        # Scheduled turns (core/store/jobs.py): a job, its claimed occurrences (unique per
        # job and scheduled time: the claim is the run's row), each person's time zone.
        """CREATE TABLE jobs (
            id TEXT PRIMARY KEY,
            person TEXT NOT NULL,
            creator_user_id TEXT NOT NULL,
            platform TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            thread_id TEXT,
            session_key TEXT NOT NULL,
            prompt TEXT NOT NULL,
            kind TEXT NOT NULL,
            spec TEXT NOT NULL,
            timezone TEXT NOT NULL,
            profile TEXT NOT NULL,
            model TEXT,
            state TEXT NOT NULL,
            state_reason TEXT,
            next_at REAL,
            created_at REAL NOT NULL,
            delivery_failures INTEGER NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX jobs_due ON jobs (next_at) WHERE state = 'active'",
        "CREATE INDEX jobs_by_person ON jobs (person)",
        """CREATE TABLE job_runs (
            id TEXT PRIMARY KEY,
            job_id TEXT NOT NULL,
            scheduled_at REAL NOT NULL,
            status TEXT NOT NULL,
            owner TEXT NOT NULL,
            lease_until REAL NOT NULL,
            started_at REAL NOT NULL,
            finished_at REAL,
            note TEXT,
            error TEXT,
            session_key TEXT,
            delivery TEXT,
            delivery_reason TEXT,
            UNIQUE (job_id, scheduled_at)
        )""",
        "CREATE INDEX job_runs_running ON job_runs (lease_until) WHERE status = 'running'",
        """CREATE TABLE person_timezones (
            person TEXT PRIMARY KEY,
            timezone TEXT NOT NULL
        )""",
    ),
)

MODEL_USAGE = Migration(
    version=13,
    name="model usage per call",
    statements=USAGE_TABLES,  # core/store/usage.py
)

MIGRATIONS: tuple[Migration, ...] = tuple(
    sorted(
        (
            INITIAL_SCHEMA,
            MESSAGE_ORIGIN_AND_CARDS,
            DEAD_LETTERS,
            TOOL_CALL_STATUS,
            OUTBOX,
            OUTBOX_STARTED,
            COMMAND_SYNCS,
            ATTACHMENTS_AND_FILES,
            PAIRING_SETTINGS_AND_LINKS,
            LIVE_STREAMS,
            SCHEDULED_TURNS,
            MEMORY,
            MODEL_USAGE,
        ),
        key=lambda m: m.version,
    )
)
LATEST_VERSION = MIGRATIONS[-1].version

_CREATE_VERSION_TABLE = """CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at REAL NOT NULL
)"""


async def read_version(conn: aiosqlite.Connection, path: Path) -> int:
    """The file's schema version (0 for an empty file); reads only, changes nothing.

    Raises ``StoreError`` for a SQLite file that holds tables but is not a store of ours.
    """
    names = {row[0] for row in await conn.execute_fetchall("SELECT name FROM sqlite_master")}
    if "schema_version" in names:
        rows = list(await conn.execute_fetchall("SELECT MAX(version) FROM schema_version"))
        return int(rows[0][0] or 0)
    if names:
        raise StoreError(f"{path} is a SQLite database but not a CommonOS store")
    return 0


def refuse_newer(
    where: object, version: int, latest: int = LATEST_VERSION, other: str = "another data dir"
) -> None:
    """``StoreError`` when ``where`` (a file, a masked database URL) holds a schema newer
    than ``latest``, the newest this code knows."""
    if version > latest:
        raise StoreError(
            f"{where} has schema version {version}, newer than this code knows "
            f"({latest}); upgrade CommonOS or point it at {other}"
        )


async def apply_migrations(
    conn: aiosqlite.Connection, current: int, migrations: Sequence[Migration] = MIGRATIONS
) -> None:
    """Apply every migration above ``current``, in order, each in its own transaction.

    ``conn`` must be in autocommit mode (``isolation_level=None``) so that the explicit
    ``BEGIN``/``COMMIT`` here are the only transaction boundaries.
    """
    for migration in migrations:
        if migration.version > current:
            await _apply(conn, migration)
            log.info("store schema migrated to version %d (%s)", migration.version, migration.name)


async def _apply(conn: aiosqlite.Connection, migration: Migration) -> None:
    await conn.execute("BEGIN IMMEDIATE")
    try:
        await conn.execute(_CREATE_VERSION_TABLE)
        for statement in migration.statements:
            await conn.execute(statement)
        await conn.execute(
            "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
            (migration.version, migration.name, time.time()),
        )
    except Exception:
        await conn.rollback()
        raise
    await conn.execute("COMMIT")
