"""The dashboard's model usage (README "Usage and quotas"): everyone's calls, tokens and
cost today and this month, and this month by profile and by model — never by person or
chat (the dashboard shows no personal data of usage).

Re-read from the store at most every :data:`REFRESH` seconds (the dashboard's state is
built four times a second; a failed read keeps the last figures).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

from core.store.usage import Totals, UsageBook
from gateway.control.usage.quota import Window

logger = logging.getLogger(__name__)

REFRESH = 10.0
SHOWN = 20
"""Profiles and models listed at most (the biggest by tokens)."""


def shown(totals: Totals) -> dict[str, Any]:
    return {
        "calls": totals.calls, "tokens": totals.tokens, "prompt": totals.prompt_tokens,
        "cached": totals.cached_tokens, "completion": totals.completion_tokens,
        "cost": round(totals.cost, 6),
    }  # fmt: skip


class UsagePanel:
    """The latest figures; ``now`` (wall time) places the day and the month, ``clock``
    (monotonic) times the re-reads."""

    def __init__(
        self,
        book: UsageBook,
        zone: ZoneInfo,
        now: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._book, self._zone, self._now, self._clock = book, zone, now, clock
        self._figures: dict[str, Any] | None = None
        self._read_at = 0.0

    async def current(self) -> dict[str, Any]:
        at = self._clock()
        if self._figures is None or at - self._read_at >= REFRESH:
            self._read_at = at
            try:
                self._figures = await self._read()
            except Exception as exc:  # the store out of reach: the last figures stay
                logger.warning("dashboard: usage not read (%s)", type(exc).__name__)
                self._figures = self._figures or {}
        return dict(self._figures)

    async def _read(self) -> dict[str, Any]:
        window = Window.at(self._now(), self._zone)
        book, month = self._book, window.month_start
        return {
            "today": shown(await book.totals(window.day_start)),
            "month": shown(await book.totals(month)),
            "profiles": {n: shown(t) for n, t in await book.top("profile", month, SHOWN)},
            "models": {n: shown(t) for n, t in await book.top("model", month, SHOWN)},
        }
