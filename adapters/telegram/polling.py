"""Our own getUpdates long-poll loop (PTB's ``Updater`` confirms updates too early).

Each fetched update is persisted through :meth:`Inbox.accept` *before* the in-memory offset
moves past it; the next ``getUpdates(offset=...)`` is what confirms it to Telegram. So an
update is either in the store or still unconfirmed on Telegram's side — never neither.
A failed persist leaves the offset where it was and the update is fetched again.

The loop survives everything but cancellation: flood control waits ``retry_after``, other
failures back off exponentially (capped) and are logged. The backoff is reset only once a
batch has been stored, so while the store keeps failing (disk full, read-only) the same
batch is fetched again ever more slowly, and logged only when the outage begins and ends
(:class:`adapters.inbox.StorageOutage`). A batch PTB cannot parse is taken apart from the
raw JSON (:class:`RawUpdates`): readable updates go on as usual, an unreadable one is
quarantined as a dead letter — one WARNING naming it, nothing lost, and it never blocks the
updates behind it. PTB's own CRITICAL record of that batch (the whole JSON, user text
included, with a traceback) is dropped by :class:`UnparsedBatchFilter`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from telegram import Bot, Update
from telegram.error import RetryAfter, TelegramError

from adapters.inbox import preview
from adapters.telegram.errors import retry_after_seconds
from adapters.telegram.inbox import Inbox, usable_update_id
from adapters.telegram.transport import AiohttpRequest
from core.store.base import StoreUnavailable

_log = logging.getLogger(__name__)

ALLOWED_UPDATES: tuple[str, ...] = ("message", "callback_query")
Fetched = Update | dict[str, Any]
"""A parsed update, or the raw JSON of one PTB could not parse."""
PTB_LOGGERS = ("telegram.Bot", "telegram.ext.ExtBot")
"""Where python-telegram-bot logs the batches ``getUpdates`` could not parse."""


class UnparsedBatchFilter(logging.Filter):
    """Drops PTB's "Error while parsing updates!" record: it holds the whole batch (user
    text included) and a traceback, at CRITICAL. The poller takes that batch apart and
    each unreadable update gets one WARNING of its own (:mod:`adapters.inbox`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Error while parsing updates")


def install_log_filter() -> None:
    """Install :class:`UnparsedBatchFilter` on PTB's bot loggers (once)."""
    for name in PTB_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, UnparsedBatchFilter) for f in logger.filters):
            logger.addFilter(UnparsedBatchFilter())


class RawUpdates(AiohttpRequest):
    """The getUpdates transport; keeps the raw ``result`` list of its latest answer."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.latest: list[dict[str, Any]] = []

    async def do_request(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        self.latest = []
        status, payload = await super().do_request(*args, **kwargs)
        self.latest = _raw_result(payload) if status == 200 else []
        return status, payload


def _raw_result(payload: bytes) -> list[dict[str, Any]]:
    try:
        result = json.loads(payload).get("result")
    except (ValueError, AttributeError):
        return []
    return [item for item in result if isinstance(item, dict)] if isinstance(result, list) else []


@dataclass(frozen=True, slots=True)
class PollSettings:
    timeout: int = 30
    """Seconds Telegram may hold one getUpdates open."""
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    allowed_updates: Sequence[str] = ALLOWED_UPDATES


class LongPoller:
    """Fetch → persist → advance offset, forever, until cancelled."""

    def __init__(
        self, bot: Bot, inbox: Inbox, settings: PollSettings, raw: RawUpdates | None = None
    ) -> None:
        self.bot = bot
        self.inbox = inbox
        self.settings = settings
        self.raw = raw
        self.offset: int | None = None
        self._failures = 0

    async def run(self) -> None:
        while True:
            batch = await self._fetch()
            if batch:
                await self._take(batch)

    async def _take(self, batch: Sequence[Fetched]) -> None:
        """Store a batch in order, moving the offset past each stored (or quarantined)
        update; on a failure stop and back off: the rest is fetched again."""
        confirmable = False
        for index, fetched in enumerate(batch):
            try:
                update_id = await self._persist(fetched)
            except StoreUnavailable as exc:
                await self.inbox.held_back(batch[index + 1 :], exc)
                await self._back_off(None, exc)  # the inbox logs the outage, once
                return
            except Exception as exc:
                await self._back_off("could not store an update", exc)
                return
            if update_id is not None:
                confirmable = True
                self.offset = max(self.offset or 0, update_id + 1)
        if not confirmable:  # nothing to confirm it by: it would come back at once
            await self._back_off("got updates without a usable update_id", None)
            return
        self._failures = 0

    async def _fetch(self) -> Sequence[Fetched]:
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
        except TelegramError as exc:
            await self._back_off("getUpdates failed", exc)
            return ()
        except Exception as exc:
            return await self._unparsed(exc)
        if not updates:
            self._failures = 0
        return updates

    async def _unparsed(self, exc: Exception) -> Sequence[Fetched]:
        if self.raw is None or not self.raw.latest:
            await self._back_off("getUpdates failed", exc)
            return ()
        _log.debug("telegram: PTB could not read a batch of updates (%s); taking it apart", exc)
        return list(self.raw.latest)

    async def _persist(self, fetched: Fetched) -> int | None:
        """Store one update; its id (None: it has none to confirm it by). Raises when
        storing failed: the offset then stays and the update is fetched again."""
        if isinstance(fetched, Update):
            await self.inbox.accept(fetched)
            return usable_update_id(fetched.update_id)
        return await self.inbox.accept_raw(fetched)

    async def _back_off(self, what: str | None, exc: Exception | None) -> None:
        """Wait ever longer (capped); ``what`` None: already logged elsewhere (debug only)."""
        self._failures += 1
        delay = min(
            self.settings.backoff_initial * 2 ** (self._failures - 1), self.settings.backoff_max
        )
        why = f" ({preview(exc)})" if exc is not None else ""
        level = logging.DEBUG if what is None else logging.WARNING
        _log.log(level, "telegram %s%s; retrying in %.1fs", what or "store out", why, delay)
        await asyncio.sleep(delay)
