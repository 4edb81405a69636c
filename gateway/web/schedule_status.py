"""Scheduled turns on ``/metrics`` and the dashboard (README "Scheduled turns"), only with
``[schedule] enabled`` (off: no collector, no dashboard section, no store read).

``/metrics`` gains, from this process's scheduler::

    commonos_schedule_runs_total{status}        runs ended here, by status
    commonos_schedule_deliveries_total{status}  their answers, sent or failed
    commonos_schedule_lag_seconds               scheduled time → start (count, sum)
    commonos_schedule_lag_recent_seconds{quantile}  p50, p99 of the latest 1,000 starts

The dashboard's ``jobs``: every job with its creator, state (the reason when paused), next
run and last outcome, re-read from the store at most every :data:`REFRESH` seconds.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from core.schedule.scheduler import SchedulerFigures
    from core.store.jobs import JobBook

logger = logging.getLogger(__name__)

REFRESH = 10.0
SHOWN = 50
"""Jobs on the dashboard at most (the oldest first)."""


class ScheduleCollector(Collector):
    def __init__(self, figures: SchedulerFigures) -> None:
        self._figures = figures

    def collect(self) -> Iterator[Metric]:
        figures = self._figures
        runs = CounterMetricFamily(
            "commonos_schedule_runs", "Scheduled runs ended here", labels=["status"]
        )
        for status, count in sorted(figures.runs.items()):
            runs.add_metric([status], count)
        yield runs
        deliveries = CounterMetricFamily(
            "commonos_schedule_deliveries", "Scheduled runs' answers", labels=["status"]
        )
        for status, count in sorted(figures.deliveries.items()):
            deliveries.add_metric([status], count)
        yield deliveries
        yield SummaryMetricFamily(
            "commonos_schedule_lag_seconds", "Scheduled time to start",
            count_value=figures.starts, sum_value=figures.lag_sum,
        )  # fmt: skip
        recent = GaugeMetricFamily(
            "commonos_schedule_lag_recent_seconds", "Lag of the latest starts",
            labels=["quantile"],
        )  # fmt: skip
        lags = list(figures.recent_lags)
        if len(lags) >= 2:
            cuts = statistics.quantiles(lags, n=100)
            recent.add_metric(["0.5"], cuts[49])
            recent.add_metric(["0.99"], cuts[98])
        yield recent


class JobsPanel:
    """The dashboard's jobs, re-read when older than :data:`REFRESH` on ``clock``."""

    def __init__(self, book: JobBook, clock: Callable[[], float] = time.monotonic) -> None:
        self._book, self._clock = book, clock
        self._jobs: list[dict[str, Any]] | None = None
        self._read_at = 0.0

    async def current(self) -> list[dict[str, Any]]:
        now = self._clock()
        if self._jobs is None or now - self._read_at >= REFRESH:
            self._read_at = now
            try:
                self._jobs = await self._read()
            except Exception as exc:  # the store out of reach: the last list stays
                logger.warning("dashboard: jobs not read (%s)", type(exc).__name__)
                self._jobs = self._jobs or []
        return list(self._jobs)

    async def _read(self) -> list[dict[str, Any]]:
        from gateway.control.schedule import describe, next_run, outcome

        shown = []
        for job in (await self._book.jobs())[:SHOWN]:
            runs = await self._book.runs_of(job.id, limit=1)
            shown.append(
                {
                    "id": job.id, "who": job.person, "what": describe(job),
                    "state": job.state_reason or job.state, "next": next_run(job),
                    "last": outcome(runs[0]) if runs else "",
                }
            )  # fmt: skip
        return shown
