"""What a chat set for its session (migration 9): ``session_settings``, one row per
session key — ``/model``, ``/busy``, ``/progress``, ``/verbose``; a NULL column is the
profile's own value (docs/architecture.md §8). Kept per key, not per session id, so a
setting outlives ``/new`` and a restart.

This module holds the statements and the row mapping (:mod:`core.store.statements`);
:class:`core.store.sqlite.SqliteStore` runs them.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.store.base import SessionSettings
from core.store.statements import Row, Statement

SESSION_SETTINGS = "SELECT * FROM session_settings WHERE session_key = ?"
PUT_SETTINGS = (
    "INSERT INTO session_settings (session_key, model, busy, progress, verbose, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_key) DO UPDATE SET"
    " model = excluded.model, busy = excluded.busy, progress = excluded.progress,"
    " verbose = excluded.verbose, updated_at = excluded.updated_at"
)


def put_session_settings(session_key: str, settings: SessionSettings, now: float) -> Statement:
    verbose = None if settings.verbose is None else int(settings.verbose)
    params = (session_key, settings.model, settings.busy, settings.progress, verbose, now)
    return Statement(PUT_SETTINGS, params, f"keep the settings of {session_key}")


def settings_from_rows(rows: Sequence[Row]) -> SessionSettings:
    """The settings in ``rows`` (the one row of a key), or all None when there is none (the
    stores ask only when there is one: a session never set has the defaults)."""
    if not rows:
        return SessionSettings()
    row = rows[0]
    verbose = row["verbose"]
    return SessionSettings(
        model=row["model"],
        busy=row["busy"],
        progress=row["progress"],
        verbose=None if verbose is None else bool(verbose),
    )
