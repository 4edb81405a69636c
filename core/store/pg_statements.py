"""The PostgreSQL dialect of the store's statements (docs/cluster.md).

:class:`core.store.postgres.PgStore` runs the *same* statement values as the SQLite store
(:mod:`core.store.sessions`, :mod:`core.store.tool_calls`, ... build them), with three
adjustments made here and nowhere else:

* **Placeholders.** SQLite's ``?`` and ``?N`` become ``$n`` (:func:`pg_sql`, once per SQL
  string: the result is cached, so a hot statement is translated once and then hits
  asyncpg's prepared-statement cache). A ``?`` inside a quoted literal is left alone.
* **Statements whose SQLite SQL PostgreSQL does not speak** are swapped for their PG
  version (:data:`PG_VERSIONS`, keyed by the SQLite SQL): ``instr``/``char`` in the
  origin lookup, ``json_each`` in deactivation, ``INSERT OR REPLACE`` (:func:`pg_steps`:
  a DELETE of every row the new one conflicts with, then the INSERT, in one transaction),
  ``verbose`` (a keyword in PG) quoted. ``rowid`` needs no translation: the PG tables
  that order by it have a ``rowid`` identity column (:mod:`core.store.pg_migrations`).
* **Text.** PostgreSQL ``text`` cannot hold NUL: :func:`pg_storable` stores ``\\x00`` as
  U+FFFD (lone surrogates never reach the store: text is made valid where it enters,
  :mod:`core.text`).
  A NUL inside JSON-encoded content is an escape (``\\u0000``) and comes back intact.

Statements that exist only on PostgreSQL (``start_turn`` with the process id,
``fail_running_turns`` that spares live sessions, inserts returning their id) are here too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from core.store import access, sessions
from core.store import settings as chat_settings
from core.store.base import TurnRecord
from core.store.statements import Statement

_PLACEHOLDER = re.compile(r"'(?:[^']|'')*'|\?(\d*)")


@lru_cache(maxsize=1024)
def pg_sql(sql: str) -> str:
    """``sql`` in PostgreSQL's dialect: its PG version if it has one, placeholders as
    ``$n`` (``?`` numbered in order, ``?N`` kept as ``$N``)."""
    sql = PG_VERSIONS.get(sql, sql)
    counter = 0

    def number(match: re.Match[str]) -> str:
        nonlocal counter
        if not match.group(0).startswith("?"):
            return match.group(0)  # a quoted literal
        if match.group(1):
            return f"${match.group(1)}"
        counter += 1
        return f"${counter}"

    return _PLACEHOLDER.sub(number, sql)


def pg_storable(params: Sequence[object]) -> tuple[object, ...]:
    """Parameters PostgreSQL accepts: NUL characters as U+FFFD."""
    return tuple(
        p.replace("\x00", "\ufffd") if isinstance(p, str) and "\x00" in p else p for p in params
    )


_REPLACED: dict[str, tuple[str, str]] = {
    access.PUT_PAIRING_CODE: ("pairing_codes", "code_hash = ? OR (platform = ? AND user_id = ?)"),
    access.PUT_LINK_CODE: ("link_codes", "code_hash = ? OR (platform = ? AND user_id = ?)"),
    access.PAIR_USER: ("paired_users", "platform = ? AND user_id = ?"),
}
"""SQLite ``INSERT OR REPLACE`` statements → (table, the rows the new one replaces, over the
insert's first parameters): on PG a DELETE then the INSERT, in one transaction."""

PG_VERSIONS: dict[str, str] = {
    sessions.MESSAGE_BY_ORIGIN: (
        "SELECT * FROM messages WHERE session_id = ?1 AND (origin = ?2"
        " OR position(E'\\n' || ?2 || E'\\n' IN E'\\n' || origin || E'\\n') > 0)"
        " ORDER BY id LIMIT 1"
    ),
    sessions.DEACTIVATE_MESSAGES: (
        "UPDATE messages SET active = 0"
        " WHERE id IN (SELECT value::bigint FROM json_array_elements_text(?::json))"
    ),
    chat_settings.PUT_SETTINGS: re.sub(r"\bverbose\b", '"verbose"', chat_settings.PUT_SETTINGS),
    **{sql: sql.replace("INSERT OR REPLACE", "INSERT", 1) for sql in _REPLACED},
}
"""SQLite SQL → the PostgreSQL SQL that does the same (same parameters, same order)."""


Step = tuple[str, tuple[object, ...]]
"""One PostgreSQL statement and its parameters."""


def pg_steps(statement: Statement) -> tuple[Step, ...]:
    """What ``statement`` is on PostgreSQL: one step, or, for an ``INSERT OR REPLACE``, the
    DELETE of every row the new one conflicts with and then the INSERT (run in one
    transaction, like SQLite's single statement)."""
    params = pg_storable(statement.params)
    replaced = _REPLACED.get(statement.sql)
    if replaced is None:
        return ((pg_sql(statement.sql), params),)
    table, keys = replaced
    delete = pg_sql(f"DELETE FROM {table} WHERE {keys}")
    return (delete, params[: keys.count("?")]), (pg_sql(statement.sql), params)


def start_turn(record: TurnRecord, process_id: str) -> Statement:
    """:func:`core.store.sessions.start_turn`, recording which process runs the turn."""
    sql = "INSERT INTO turns (id, session_id, started_at, process_id) VALUES (?, ?, ?, ?)"
    plain = sessions.start_turn(record)
    return Statement(sql, (*plain.params, process_id), plain.doing)


def fail_running_turns(reason: str, now: float) -> Statement:
    """:func:`core.store.sessions.fail_running_turns` for turns no live process runs: a
    turn whose session lease (``session:<key>``) is missing or expired."""
    plain = sessions.fail_running_turns(reason, now)
    sql = (
        plain.sql + " AND NOT EXISTS (SELECT 1 FROM sessions s JOIN leases l"
        " ON l.name = 'session:' || s.key"
        " WHERE s.id = turns.session_id AND l.expires_at > clock_timestamp())"
    )
    return Statement(sql, plain.params, plain.doing)


def returning(statement: Statement, column: str) -> Statement:
    """``statement`` (an INSERT) returning the new row's ``column`` (SQLite's lastrowid)."""
    return statement._replace(sql=f"{statement.sql} RETURNING {column}")
