"""What the store keeps for the platform adapters: ``inbound``, ``dead_letters`` and
``command_syncs``.

The inbound queue holds every received item, stored before it is confirmed, keyed by
``(platform, update_id)`` so a redelivered update is taken in once (``INSERT ... ON CONFLICT
DO NOTHING``, whose row count says whether it was new); it stays ``pending``/``processing``
until handled, so a restart finds it (docs/architecture.md §3 step 2, §8).
A dead letter is an inbound item that could not be taken in, kept raw for an operator.
A command sync is the digest of the command list last registered with a platform for a
scope (a guild, or ``global``), so a restart with the same set registers nothing.

This module holds the statements and the row mapping (:mod:`core.store.statements`);
:class:`core.store.sqlite.SqliteStore` runs them.
"""

from __future__ import annotations

from typing import cast

from core.store.base import DeadLetter, InboundRecord, InboundState
from core.store.statements import Query, Row, Statement, insert_sql

# inbound queue -------------------------------------------------------------

INBOUND_COLUMNS = ("platform", "update_id", "session_key", "payload", "state", "received_at")
_INSERT_INBOUND = insert_sql(
    "inbound", INBOUND_COLUMNS, " ON CONFLICT (platform, update_id) DO NOTHING"
)
UNFINISHED_INBOUND = (
    "SELECT * FROM inbound WHERE platform = ? AND state IN ('pending', 'processing')"
    " ORDER BY received_at, rowid"
)
INBOUND = "SELECT * FROM inbound WHERE platform = ? AND update_id = ?"


def enqueue_inbound(record: InboundRecord) -> Statement:
    params = (
        record.platform,
        record.update_id,
        record.session_key,
        record.payload,
        record.state,
        record.received_at,
    )
    return Statement(
        _INSERT_INBOUND, params, f"enqueue inbound {record.platform}/{record.update_id}"
    )


def set_inbound_state(platform: str, update_id: str, state: InboundState) -> Statement:
    sql = "UPDATE inbound SET state = ? WHERE platform = ? AND update_id = ?"
    return Statement(sql, (state, platform, update_id), f"inbound item {platform}/{update_id}")


def inbound_from_row(row: Row) -> InboundRecord:
    return InboundRecord(
        platform=row["platform"],
        update_id=row["update_id"],
        session_key=row["session_key"],
        payload=row["payload"],
        received_at=row["received_at"],
        state=cast(InboundState, row["state"]),
    )


# dead letters --------------------------------------------------------------

DEAD_LETTER_COLUMNS = ("platform", "item_id", "raw", "error", "attempts", "created_at")
_INSERT_DEAD_LETTER = insert_sql(
    "dead_letters", DEAD_LETTER_COLUMNS, " ON CONFLICT (platform, item_id) DO NOTHING"
)


def add_dead_letter(letter: DeadLetter) -> Statement:
    """The letter's row (the id is the store's to assign); kept once per item."""
    params = (
        letter.platform,
        letter.item_id,
        letter.raw,
        letter.error,
        letter.attempts,
        letter.created_at,
    )
    doing = f"keep dead letter {letter.platform}/{letter.item_id}"
    return Statement(_INSERT_DEAD_LETTER, params, doing)


def dead_letters(platform: str | None) -> Query:
    """The dead letters in the order they were kept: all of them, or one platform's."""
    sql = "SELECT * FROM dead_letters"
    params: tuple[object, ...] = ()
    if platform is not None:
        sql, params = sql + " WHERE platform = ?", (platform,)
    return sql + " ORDER BY id", params


def drop_dead_letter(letter_id: int) -> Statement:
    sql = "DELETE FROM dead_letters WHERE id = ?"
    return Statement(sql, (letter_id,), f"drop dead letter {letter_id}")


def dead_letter_from_row(row: Row) -> DeadLetter:
    return DeadLetter(
        platform=row["platform"],
        item_id=row["item_id"],
        raw=row["raw"],
        error=row["error"],
        attempts=row["attempts"],
        created_at=row["created_at"],
        id=row["id"],
    )


# command syncs -------------------------------------------------------------

SYNCED_COMMANDS = "SELECT digest FROM command_syncs WHERE platform = ? AND scope = ?"


def set_synced_commands(platform: str, scope: str, digest: str, now: float) -> Statement:
    sql = (
        "INSERT INTO command_syncs (platform, scope, digest, synced_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (platform, scope) DO UPDATE"
        " SET digest = excluded.digest, synced_at = excluded.synced_at"
    )
    doing = f"record the {platform} commands synced for {scope}"
    return Statement(sql, (platform, scope, digest, now), doing)
