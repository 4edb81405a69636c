"""Model usage in the store (SQLite migration 13, PostgreSQL 6; core/store/usage.py): rows
kept as given, the quota read (a person's and a chat's day and month in one statement) and
the reports; each test on SQLite and PostgreSQL. Two PgStores on one PostgreSQL (two
processes) enforce one quota."""

from __future__ import annotations

import pytest

from core.agent.scope import TurnScope
from core.agent.usage import ModelSpend, QuotaReached
from core.store.base import Store
from core.store.postgres import PgStore, open_pg_store
from core.store.usage import Spent, Totals, UsageBook, UsageRow
from core.types import Usage
from gateway.config.quotas import QuotaLimits, QuotasSection
from gateway.control.usage.meter import GatewayMeter, chat_of
from gateway.control.usage.quota import QuotaRule

DAY_START, MONTH_START = 1000.0, 100.0


@pytest.fixture
def store(any_store: Store) -> Store:
    return any_store


def row(
    at: float, person: str | None = "tg:1", chat: str = "tg:group:9", **figures: object
) -> UsageRow:
    values: dict[str, object] = dict(
        at=at, person=person, chat=chat, profile="default", model="cheap", session_key=chat,
        turn_id="t", prompt_tokens=100, cached_tokens=40, completion_tokens=10, estimated=False,
        cost=0.5,
    )  # fmt: skip
    values.update(figures)
    return UsageRow(**values)  # type: ignore[arg-type]


async def test_rows_are_kept_as_given(store: Store) -> None:
    book = UsageBook(store)  # type: ignore[arg-type]
    first = row(1.0)
    second = row(2.0, person=None, estimated=True, cost=None, prompt_tokens=7)
    await book.add(first)
    await book.add(second)
    assert await book.rows() == [first, second]


async def test_the_quota_read_sums_a_persons_and_a_chats_day_and_month(store: Store) -> None:
    book = UsageBook(store)  # type: ignore[arg-type]
    await book.add(row(50.0))  # last month: not counted
    await book.add(row(500.0))  # this month, before today
    await book.add(row(1500.0))
    await book.add(row(1600.0, person="tg:2"))  # another person in the chat
    await book.add(row(1700.0, chat="tg:dm:1", cost=None))  # the person elsewhere

    mine, chat = await book.spent("tg:1", "tg:group:9", DAY_START, MONTH_START)

    assert mine == Spent(day_tokens=220, day_cost=0.5, month_tokens=330, month_cost=1.0)
    assert chat == Spent(day_tokens=220, day_cost=1.0, month_tokens=330, month_cost=1.5)
    nobody, _ = await book.spent(None, "tg:group:9", DAY_START, MONTH_START)
    assert nobody == Spent()


async def test_totals_and_the_top_spenders(store: Store) -> None:
    book = UsageBook(store)  # type: ignore[arg-type]
    await book.add(row(1500.0))
    await book.add(row(1600.0, person="tg:2", prompt_tokens=500))
    await book.add(row(1700.0, person="tg:2", estimated=True))

    assert await book.totals(DAY_START, "tg:1") == Totals(1, 100, 40, 10, 0, 0.5)
    assert (await book.totals(DAY_START)).tokens == 110 + 510 + 110
    top = await book.top("person", DAY_START)
    assert [(name, t.tokens) for name, t in top] == [("tg:2", 620), ("tg:1", 110)]
    assert [name for name, _ in await book.top("chat", DAY_START)] == ["tg:group:9"]
    with pytest.raises(ValueError):
        await book.top("cost; DROP TABLE model_usage", DAY_START)


def test_a_child_agents_and_a_members_session_count_to_their_chat() -> None:
    assert chat_of("telegram:dm:7/child:t1:d1", "telegram:7") == "telegram:dm:7"
    assert chat_of("discord:guild:5:chan:42", "discord:42") == "discord:guild:5:chan"
    assert chat_of("slack:channel:C1", "slack:U1") == "slack:channel:C1"


async def test_two_processes_on_postgresql_enforce_one_quota(pg_store: PgStore) -> None:
    other = await open_pg_store(pg_store.dsn, process_id="test/other", pool_size=2)
    clock = lambda: 1_800_000_000.0  # noqa: E731
    quotas = QuotasSection(person=QuotaLimits(daily_tokens=1000))

    def meter(store: PgStore) -> GatewayMeter:
        book = UsageBook(store)
        rule = QuotaRule(quotas, book, lambda key: (), clock)
        return GatewayMeter(book, "default", {}, quotas=rule, clock=clock)

    first, second = meter(pg_store), meter(other)
    scope = TurnScope("telegram:dm:1", "s", "t", "telegram:1")
    try:
        await first.admit(scope)
        await first.record(ModelSpend(scope, "m", Usage(600, 0)))
        await second.admit(scope)  # 600 of 1000: the other process may still start one
        await second.record(ModelSpend(scope, "m", Usage(450, 0)))
        for process in (first, second):
            with pytest.raises(QuotaReached, match="daily quota of 1,000 tokens"):
                await process.admit(scope)
        await second.admit(TurnScope("telegram:dm:2", "s2", "t2", "telegram:2"))
    finally:
        await other.close()
