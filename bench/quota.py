"""``python -m bench quota``: what the ``[quotas]`` check adds to each model call — the one
read of a person's and a chat's day and month (``core/store/usage.py`` ``SPENT``) — on
SQLite and on PostgreSQL, with a month of usage in the store (100 people in 20 chats,
ROWS calls; the person asking has ROWS/100 of them). p50/p99 of ``GatewayMeter.admit``
over CHECKS checks, each followed by the call's ``record`` (not timed)."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from bench.sizes import Sizes
from core.agent.scope import TurnScope
from core.agent.usage import ModelSpend
from core.store.jobs import StatementRunner
from core.store.postgres import open_pg_store
from core.store.sqlite import open_store
from core.store.usage import UsageBook, UsageRow
from core.types import Usage
from gateway.config.quotas import QuotaLimits, QuotasSection
from gateway.control.usage.meter import GatewayMeter
from gateway.control.usage.quota import QuotaRule
from tests.support.postgres import running_postgres

ROWS, CHECKS = 20_000, 500
NOW = 1_800_000_000.0  # 2027-01-15 08:00 UTC
QUOTAS = QuotasSection(
    person=QuotaLimits(daily_tokens=10**12, monthly_cost=10**9.0),
    chat=QuotaLimits(monthly_tokens=10**12),
)


def _row(n: int) -> UsageRow:
    person = f"telegram:{n % 100}"
    chat = f"telegram:group:{n % 20}"
    at = NOW - (n % (14 * 86_400))  # spread over this month
    return UsageRow(
        at, person, chat, "default", "cheap", chat, f"t{n}", 1200, 300, 80, False, 0.0004
    )


async def _measure(store: StatementRunner) -> tuple[float, float]:
    book = UsageBook(store)
    for n in range(ROWS):
        await book.add(_row(n))
    clock = lambda: NOW  # noqa: E731
    rule = QuotaRule(QUOTAS, book, lambda key: (), clock)
    meter = GatewayMeter(book, "default", {}, quotas=rule, clock=clock)
    scope = TurnScope("telegram:group:7", "s", "t", "telegram:7")
    took: list[float] = []
    for _ in range(CHECKS):
        started = time.perf_counter()
        await meter.admit(scope)
        took.append(time.perf_counter() - started)
        await meter.record(ModelSpend(scope, "cheap", Usage(1200, 80, 300)))
    cuts = statistics.quantiles(took, n=100)
    return cuts[49] * 1000, cuts[98] * 1000


async def run(sizes: Sizes) -> None:
    print(f"quota check per model call ({ROWS:,} usage rows this month, {CHECKS} checks)")
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(Path(tmp) / "state.db")
        try:
            p50, p99 = await _measure(store)
        finally:
            await store.close()
    print(f"  SQLite      p50 {p50:.3f} ms  p99 {p99:.3f} ms")
    async with running_postgres("bench-quota") as pg:
        pg_store = await open_pg_store(pg.url(await pg.create_database()), process_id="bench/1")
        try:
            p50, p99 = await _measure(pg_store)
        finally:
            await pg_store.close()
    print(f"  PostgreSQL  p50 {p50:.3f} ms  p99 {p99:.3f} ms")
