"""Our own getUpdates long-poll loop (PTB's ``Updater`` confirms updates too early).

Each fetched update is persisted through :meth:`Inbox.accept` *before* the in-memory offset
moves past it; the next ``getUpdates(offset=...)`` is what confirms it to Telegram. So an
update is either in the store or still unconfirmed on Telegram's side — never neither.
A failed persist leaves the offset where it was and the update is fetched again.

The loop survives everything but cancellation: flood control waits ``retry_after``, other
failures back off exponentially (capped) and are logged. A batch PTB cannot parse is taken
apart from the raw JSON (:class:`RawUpdates`): readable updates go on as usual, an
unreadable one is stored as ``failed`` with its payload — one error, nothing lost, and it
never blocks the updates behind it.
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
from telegram.request import HTTPXRequest

from adapters.telegram.errors import retry_after_seconds
from adapters.telegram.inbox import Inbox

_log = logging.getLogger(__name__)

ALLOWED_UPDATES: tuple[str, ...] = ("message", "callback_query")
Fetched = Update | dict[str, Any]
"""A parsed update, or the raw JSON of one PTB could not parse."""


class RawUpdates(HTTPXRequest):
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
            for fetched in await self._fetch():
                try:
                    update_id = await self._persist(fetched)
                except Exception as exc:
                    await self._back_off("could not store an update", exc)
                    break
                if update_id is not None:
                    self.offset = max(self.offset or 0, update_id + 1)

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
        self._failures = 0
        return updates

    async def _unparsed(self, exc: Exception) -> Sequence[Fetched]:
        if self.raw is None or not self.raw.latest:
            await self._back_off("getUpdates failed", exc)
            return ()
        _log.error("telegram: PTB could not read a batch of updates (%s); taking it apart", exc)
        return list(self.raw.latest)

    async def _persist(self, fetched: Fetched) -> int | None:
        """Store one update; its id (None: it has none to confirm it by). Raises when
        storing failed: the offset then stays and the update is fetched again."""
        if isinstance(fetched, Update):
            await self.inbox.accept(fetched)
            return fetched.update_id
        return await self.inbox.accept_raw(fetched)

    async def _back_off(self, what: str, exc: Exception) -> None:
        self._failures += 1
        delay = min(
            self.settings.backoff_initial * 2 ** (self._failures - 1), self.settings.backoff_max
        )
        _log.warning(
            "telegram %s (%s: %s); retrying in %.1fs", what, type(exc).__name__, exc, delay
        )
        await asyncio.sleep(delay)
