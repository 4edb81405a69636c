"""What model calls spent, in the store (SQLite migration 13, PostgreSQL 6): ``model_usage``.

One row per finished model call (:mod:`core.agent.usage`): when, whose (the person — the
platform-qualified sender — and the chat), which profile and model, the prompt, cached and
completion tokens (``estimated`` when the server gave none) and the cost when the model
has a price.

**The quota read is one statement.** :meth:`UsageBook.spent` sums a person's and a chat's
tokens and cost since the start of the day and of the month in one query of two index
range scans (``model_usage_person`` and ``model_usage_chat`` cover every column it reads,
so neither visits the table). Every process writes and reads the same rows: on PostgreSQL
a quota holds across processes.

:class:`UsageBook` builds the statements and runs them through a
:class:`core.store.jobs.StatementRunner` (both stores are one), so the ``Store`` protocol
does not grow and both backends run the same SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.store.jobs import StatementRunner
from core.store.statements import Row, Statement, insert_sql

COLUMNS = (
    "at", "person", "chat", "profile", "model", "session_key", "turn_id",
    "prompt_tokens", "cached_tokens", "completion_tokens", "estimated", "cost",
)  # fmt: skip

_INSERT = insert_sql("model_usage", COLUMNS)
"""One model call's row; its parameters are :data:`COLUMNS` in order."""

_TABLE = """CREATE TABLE model_usage (
    id {id},
    at {real} NOT NULL,
    person TEXT,
    chat TEXT NOT NULL,
    profile TEXT NOT NULL,
    model TEXT NOT NULL,
    session_key TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    estimated INTEGER NOT NULL,
    cost {real}
)"""
_INDEXES = (
    "CREATE INDEX model_usage_person"
    " ON model_usage (person, at, prompt_tokens, completion_tokens, cost)",
    "CREATE INDEX model_usage_chat"
    " ON model_usage (chat, at, prompt_tokens, completion_tokens, cost)",
    "CREATE INDEX model_usage_at ON model_usage (at)",
)
SQLITE_TABLES: tuple[str, ...] = (
    _TABLE.format(id="INTEGER PRIMARY KEY", real="REAL"),
    *_INDEXES,
)
PG_TABLES: tuple[str, ...] = (
    _TABLE.format(id="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", real="DOUBLE PRECISION"),
    *_INDEXES,
)

_TOKENS = "prompt_tokens + completion_tokens"
_SPENT_PART = (
    f"SELECT '{{column}}' AS who, COALESCE(SUM({_TOKENS}) FILTER (WHERE at >= ?), 0) AS day_tokens,"
    " COALESCE(SUM(cost) FILTER (WHERE at >= ?), 0) AS day_cost,"
    f" COALESCE(SUM({_TOKENS}), 0) AS month_tokens, COALESCE(SUM(cost), 0) AS month_cost"
    " FROM model_usage WHERE {column} = ? AND at >= ?"
)
SPENT = _SPENT_PART.format(column="person") + " UNION ALL " + _SPENT_PART.format(column="chat")
"""A person's and a chat's day and month, in one read (the quota check)."""

_SUMS = (
    "COUNT(*) AS calls, COALESCE(SUM(prompt_tokens), 0) AS prompt_tokens,"
    " COALESCE(SUM(cached_tokens), 0) AS cached_tokens,"
    " COALESCE(SUM(completion_tokens), 0) AS completion_tokens,"
    " COALESCE(SUM(estimated), 0) AS estimated, COALESCE(SUM(cost), 0) AS cost"
)
TOTALS_OF_PERSON = f"SELECT {_SUMS} FROM model_usage WHERE person = ? AND at >= ?"
TOTALS = f"SELECT {_SUMS} FROM model_usage WHERE at >= ?"
_GROUPABLE = ("person", "chat", "profile", "model")


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One model call's record."""

    at: float
    person: str | None
    """The platform-qualified sender (``telegram:42``); None when no person asked."""
    chat: str
    """The chat's session key (a child agent's: its parent's)."""
    profile: str
    model: str
    session_key: str
    turn_id: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    estimated: bool
    cost: float | None
    """In the price table's currency; None when the model has no price."""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class Spent:
    """Tokens and cost since the start of the day and of the month."""

    day_tokens: int = 0
    day_cost: float = 0.0
    month_tokens: int = 0
    month_cost: float = 0.0


@dataclass(frozen=True, slots=True)
class Totals:
    """What a set of calls spent."""

    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    estimated: int = 0
    """How many of the calls were estimated."""
    cost: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class UsageBook:
    """``model_usage`` over a store (:class:`core.store.sqlite.SqliteStore` or
    :class:`core.store.postgres.PgStore`)."""

    def __init__(self, runner: StatementRunner) -> None:
        self._runner = runner

    async def add(self, row: UsageRow) -> None:
        params = (
            row.at, row.person, row.chat, row.profile, row.model, row.session_key, row.turn_id,
            row.prompt_tokens, row.cached_tokens, row.completion_tokens, int(row.estimated),
            row.cost,
        )  # fmt: skip
        await self._runner.run_statement(Statement(_INSERT, params, "usage row"))

    async def spent(
        self, person: str | None, chat: str, day_start: float, month_start: float
    ) -> tuple[Spent, Spent]:
        """The person's and the chat's :class:`Spent`, in one read (``person`` None:
        nothing of a person)."""
        params = (
            day_start,
            day_start,
            person,
            month_start,
            day_start,
            day_start,
            chat,
            month_start,
        )
        rows = {row["who"]: _spent(row) for row in await self._runner.read_rows(SPENT, params)}
        return rows.get("person", Spent()), rows.get("chat", Spent())

    async def totals(self, since: float, person: str | None = None) -> Totals:
        """Everyone's calls since ``since``, or ``person``'s."""
        if person is None:
            rows = await self._runner.read_rows(TOTALS, (since,))
        else:
            rows = await self._runner.read_rows(TOTALS_OF_PERSON, (person, since))
        return _totals(rows[0]) if rows else Totals()

    async def top(self, by: str, since: float, limit: int = 5) -> list[tuple[str, Totals]]:
        """The ``limit`` biggest spenders since ``since`` grouped by ``by`` (``person``,
        ``chat``, ``profile`` or ``model``), by tokens."""
        if by not in _GROUPABLE:
            raise ValueError(f"usage cannot be grouped by {by!r}")
        sql = (
            f"SELECT {by} AS name, {_SUMS} FROM model_usage WHERE at >= ? AND {by} IS NOT NULL"
            f" GROUP BY {by} ORDER BY SUM({_TOKENS}) DESC, {by} LIMIT ?"
        )
        rows = await self._runner.read_rows(sql, (since, limit))
        return [(str(row["name"]), _totals(row)) for row in rows]

    async def rows(self, since: float = 0.0) -> list[UsageRow]:
        """Every call since ``since``, oldest first."""
        found = await self._runner.read_rows(
            "SELECT * FROM model_usage WHERE at >= ? ORDER BY at, id", (since,)
        )
        return [_row(row) for row in found]


def _spent(row: Row) -> Spent:
    return Spent(
        int(row["day_tokens"]), float(row["day_cost"]),
        int(row["month_tokens"]), float(row["month_cost"]),
    )  # fmt: skip


def _totals(row: Row) -> Totals:
    return Totals(
        calls=int(row["calls"]),
        prompt_tokens=int(row["prompt_tokens"]),
        cached_tokens=int(row["cached_tokens"]),
        completion_tokens=int(row["completion_tokens"]),
        estimated=int(row["estimated"]),
        cost=float(row["cost"]),
    )


def _row(row: Row) -> UsageRow:
    return UsageRow(
        at=float(row["at"]),
        person=row["person"],
        chat=row["chat"],
        profile=row["profile"],
        model=row["model"],
        session_key=row["session_key"],
        turn_id=row["turn_id"],
        prompt_tokens=int(row["prompt_tokens"]),
        cached_tokens=int(row["cached_tokens"]),
        completion_tokens=int(row["completion_tokens"]),
        estimated=bool(row["estimated"]),
        cost=None if row["cost"] is None else float(row["cost"]),
    )


def rows_of(rows: Sequence[UsageRow]) -> Totals:
    """The totals of ``rows`` (as :meth:`UsageBook.totals` sums them)."""
    return Totals(
        calls=len(rows),
        prompt_tokens=sum(r.prompt_tokens for r in rows),
        cached_tokens=sum(r.cached_tokens for r in rows),
        completion_tokens=sum(r.completion_tokens for r in rows),
        estimated=sum(r.estimated for r in rows),
        cost=sum(r.cost or 0.0 for r in rows),
    )
