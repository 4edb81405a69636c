"""Who may talk to the agent and who is who, as the chat changed it (migration 9):
``pairing_codes``, ``paired_users``, ``link_codes`` and ``identity_links``.

A pairing code is what a stranger got in a DM (docs/pairing.md): stored by its hash, one per
``(platform, user_id)`` — a new code replaces the user's earlier one —, taken (removed) once
approved, and dropped once expired. A paired user is one an owner let in; ``announced``
says they were told. A link code is a short-lived ``/link`` code, one per identity as well;
an identity link maps a ``(platform, user_id)`` to a person, so that person's DMs on every
linked platform are one session (docs/architecture.md §8).

This module holds the statements and the row mapping (:mod:`core.store.statements`);
:class:`core.store.sqlite.SqliteStore` runs them. ``INSERT OR REPLACE`` removes every row a
new one conflicts with (by its key or by its user), so "put" replaces in one statement, and
"take" is ``DELETE ... RETURNING``: a code is taken once, by the first taker.
"""

from __future__ import annotations

from core.store.base import LinkCode, PairedUser, PairingCode
from core.store.statements import Query, Row, Statement, insert_sql

# pairing codes -------------------------------------------------------------

_PAIRING_COLUMNS = (
    "code_hash",
    "platform",
    "user_id",
    "name",
    "chat_id",
    "created_at",
    "expires_at",
)
PUT_PAIRING_CODE = insert_sql("pairing_codes", _PAIRING_COLUMNS).replace(
    "INSERT", "INSERT OR REPLACE", 1
)
TAKE_PAIRING_CODE = "DELETE FROM pairing_codes WHERE code_hash = ? RETURNING *"


def put_pairing_code(code: PairingCode) -> Statement:
    params = (
        code.code_hash,
        code.platform,
        code.user_id,
        code.name,
        code.chat_id,
        code.created_at,
        code.expires_at,
    )
    return Statement(PUT_PAIRING_CODE, params, f"keep the pairing code of {code.platform} user")


def pairing_codes(platform: str | None) -> Query:
    """The codes not taken yet, oldest first: all of them, or one platform's."""
    return _of_platform("SELECT * FROM pairing_codes", platform, "created_at, rowid")


def take_pairing_code(code_hash: str) -> Statement:
    return Statement(TAKE_PAIRING_CODE, (code_hash,), "take a pairing code")


def drop_pairing_codes(before: float) -> Statement:
    sql = "DELETE FROM pairing_codes WHERE expires_at < ?"
    return Statement(sql, (before,), "drop expired pairing codes")


def pairing_code_from_row(row: Row) -> PairingCode:
    return PairingCode(
        code_hash=row["code_hash"],
        platform=row["platform"],
        user_id=row["user_id"],
        name=row["name"],
        chat_id=row["chat_id"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
    )


# paired users --------------------------------------------------------------

_PAIRED_COLUMNS = ("platform", "user_id", "name", "paired_at", "paired_by", "announced")
PAIR_USER = insert_sql("paired_users", _PAIRED_COLUMNS).replace("INSERT", "INSERT OR REPLACE", 1)


def pair_user(user: PairedUser) -> Statement:
    params = (
        user.platform,
        user.user_id,
        user.name,
        user.paired_at,
        user.paired_by,
        int(user.announced),
    )
    return Statement(PAIR_USER, params, f"pair {user.platform} user {user.user_id}")


def unpair_user(platform: str, user_id: str) -> Statement:
    sql = "DELETE FROM paired_users WHERE platform = ? AND user_id = ?"
    return Statement(sql, (platform, user_id), f"unpair {platform} user {user_id}")


def paired_users(platform: str | None) -> Query:
    """The paired users in the order they were paired: all, or one platform's."""
    return _of_platform("SELECT * FROM paired_users", platform, "paired_at, rowid")


def mark_paired_announced(platform: str, user_id: str) -> Statement:
    sql = "UPDATE paired_users SET announced = 1 WHERE platform = ? AND user_id = ?"
    return Statement(sql, (platform, user_id), f"paired {platform} user {user_id}")


def paired_user_from_row(row: Row) -> PairedUser:
    return PairedUser(
        platform=row["platform"],
        user_id=row["user_id"],
        name=row["name"],
        paired_at=row["paired_at"],
        paired_by=row["paired_by"],
        announced=bool(row["announced"]),
    )


# link codes and identity links ---------------------------------------------

_LINK_CODE_COLUMNS = ("code_hash", "platform", "user_id", "created_at", "expires_at")
PUT_LINK_CODE = insert_sql("link_codes", _LINK_CODE_COLUMNS).replace(
    "INSERT", "INSERT OR REPLACE", 1
)
TAKE_LINK_CODE = "DELETE FROM link_codes WHERE code_hash = ? RETURNING *"
PERSON_OF = "SELECT person FROM identity_links WHERE platform = ? AND user_id = ?"
IDENTITIES_OF = (
    "SELECT platform, user_id FROM identity_links WHERE person = ? ORDER BY linked_at, rowid"
)
IDENTITY_LINKS = "SELECT platform, user_id, person FROM identity_links ORDER BY linked_at, rowid"


def put_link_code(code: LinkCode) -> Statement:
    params = (code.code_hash, code.platform, code.user_id, code.created_at, code.expires_at)
    return Statement(PUT_LINK_CODE, params, f"keep a link code of {code.platform} user")


def take_link_code(code_hash: str) -> Statement:
    return Statement(TAKE_LINK_CODE, (code_hash,), "take a link code")


def link_code_from_row(row: Row) -> LinkCode:
    return LinkCode(
        code_hash=row["code_hash"],
        platform=row["platform"],
        user_id=row["user_id"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
    )


def link_identity(platform: str, user_id: str, person: str, now: float) -> Statement:
    sql = (
        "INSERT INTO identity_links (platform, user_id, person, linked_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (platform, user_id) DO UPDATE"
        " SET person = excluded.person, linked_at = excluded.linked_at"
    )
    return Statement(sql, (platform, user_id, person, now), f"link {platform} user {user_id}")


def unlink_identity(platform: str, user_id: str) -> Statement:
    sql = "DELETE FROM identity_links WHERE platform = ? AND user_id = ?"
    return Statement(sql, (platform, user_id), f"unlink {platform} user {user_id}")


def _of_platform(select: str, platform: str | None, order: str) -> Query:
    params: tuple[object, ...] = ()
    if platform is not None:
        select, params = select + " WHERE platform = ?", (platform,)
    return f"{select} ORDER BY {order}", params
