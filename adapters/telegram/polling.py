"""Our own getUpdates long-poll loop (PTB's ``Updater`` confirms updates too early).

Each fetched update is persisted through :meth:`Inbox.accept` *before* the in-memory offset
moves past it; the next ``getUpdates(offset=...)`` is what confirms it to Telegram. So an
update is either in the store or still unconfirmed on Telegram's side — never neither.
A failed persist leaves the offset where it was and the update is fetched again.

The loop survives everything but cancellation: flood control waits ``retry_after``, other
failures back off exponentially (capped) and are logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from telegram import Bot, Update
from telegram.error import RetryAfter

from adapters.telegram.errors import retry_after_seconds
from adapters.telegram.inbox import Inbox

_log = logging.getLogger(__name__)

ALLOWED_UPDATES: tuple[str, ...] = ("message", "callback_query")


@dataclass(frozen=True, slots=True)
class PollSettings:
    timeout: int = 30
    """Seconds Telegram may hold one getUpdates open."""
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    allowed_updates: Sequence[str] = ALLOWED_UPDATES


class LongPoller:
    """Fetch → persist → advance offset, forever, until cancelled."""

    def __init__(self, bot: Bot, inbox: Inbox, settings: PollSettings) -> None:
        self.bot = bot
        self.inbox = inbox
        self.settings = settings
        self.offset: int | None = None
        self._failures = 0

    async def run(self) -> None:
        while True:
            updates = await self._fetch()
            for update in updates:
                if not await self._persist(update):
                    break
                self.offset = update.update_id + 1

    async def _fetch(self) -> tuple[Update, ...]:
        try:
            updates = await self.bot.get_updates(
                offset=self.offset,
                timeout=self.settings.timeout,
                allowed_updates=list(self.settings.allowed_updates),
            )
        except RetryAfter as exc:
            delay = retry_after_seconds(exc)
            _log.warning("telegram getUpdates rate limited; retrying in %.1fs", delay)
            await asyncio.sleep(delay)
            return ()
        except Exception as exc:
            await self._back_off("getUpdates failed", exc)
            return ()
        self._failures = 0
        return updates

    async def _persist(self, update: Update) -> bool:
        try:
            await self.inbox.accept(update)
        except Exception as exc:
            await self._back_off(f"could not persist update {update.update_id}", exc)
            return False
        return True

    async def _back_off(self, what: str, exc: Exception) -> None:
        self._failures += 1
        delay = min(
            self.settings.backoff_initial * 2 ** (self._failures - 1), self.settings.backoff_max
        )
        _log.warning(
            "telegram %s (%s: %s); retrying in %.1fs", what, type(exc).__name__, exc, delay
        )
        await asyncio.sleep(delay)
