"""Our own getUpdates long-poll loop (PTB's ``Updater`` confirms updates too early).

Each fetched update is persisted through :meth:`Inbox.accept` *before* the in-memory offset
moves past it; the next ``getUpdates(offset=...)`` is what confirms it to Telegram. So an
update is either in the store or still unconfirmed on Telegram's side — never neither.
A failed persist leaves the offset where it was and the update is fetched again.

The loop survives everything but cancellation and a rejected token. Its connection health
(``adapters.health``, docs/architecture.md §10) is the adapter's: a failed ``getUpdates`` —
a network error, a 5xx, a 409 Conflict, flood control — makes it ``retrying`` (since the
first failure) and the next ``getUpdates`` waits: ``retry_after`` for flood control, else
the exponential backoff with full jitter (:class:`adapters.health.Backoff`, capped); that
next one is a short poll (``timeout=0``, answered at once) and its answer makes it ``up``.
A rejected token (401/404, PTB's ``InvalidToken``) makes it ``down`` with the fix, logged
once at ERROR, and ends the loop.
The backoff is reset only once a batch has been stored (or an empty one answered), so while
the store keeps failing (disk full, read-only) the same batch is fetched again ever more
slowly, and logged only when the outage begins and ends
(:class:`adapters.inbox.StorageOutage`); the connection stays ``up`` meanwhile. The sleep
is injected (``PollSettings.sleep``): tests run the backoff without waiting.

A batch PTB cannot parse is taken apart from the raw JSON (:class:`RawUpdates`): readable
updates go on as usual, an unreadable one is quarantined as a dead letter — one WARNING
naming it, nothing lost, and it never blocks the updates behind it. PTB's own CRITICAL
record of that batch (the whole JSON, user text included, with a traceback) is dropped by
:class:`UnparsedBatchFilter`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from telegram import Bot, Update
from telegram.error import InvalidToken, RetryAfter, TelegramError

from adapters.health import Backoff, HealthCell, Sleep
from adapters.inbox import preview
from adapters.telegram.errors import retry_after_seconds
from adapters.telegram.inbox import Inbox, usable_update_id
from adapters.telegram.transport import AiohttpRequest
from core.store.base import StoreUnavailable

_log = logging.getLogger(__name__)

ALLOWED_UPDATES: tuple[str, ...] = ("message", "callback_query", "stopped_message_generation")
"""What the bot asks Telegram for: a draft's Stop press (Bot API 10.3) is sent only when
asked for (``adapters/telegram/drafts.py``)."""
Fetched = Update | dict[str, Any]
"""A parsed update, or the raw JSON of one PTB could not parse."""
PTB_LOGGERS = ("telegram.Bot",)
"""Where python-telegram-bot logs the batches ``getUpdates`` could not parse (the adapter's
bot is a plain ``telegram.Bot``: ``telegram.ext`` is never imported)."""
TOKEN_REJECTED = (
    "Telegram rejected the bot token (401/404): set [telegram] token (or "
    "COMMONOS_TELEGRAM_TOKEN) to the token @BotFather gives for this bot (/revoke ends the "
    "old one) and restart the gateway"
)
"""The reason and the fix when ``getMe`` or ``getUpdates`` answers 401/404 (PTB's
``InvalidToken``, whose message may hold the token itself: it is never shown)."""


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
    """The getUpdates transport; keeps the body of its latest answer (:meth:`latest`): the
    updates as Telegram sent them, stored as they are (not serialised again from PTB's
    objects), and taken apart when PTB could not parse the batch."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._payload = b""

    async def do_request(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        self._payload = b""
        status, payload = await super().do_request(*args, **kwargs)
        if status == 200:
            self._payload = payload
        return status, payload

    def latest(self) -> list[dict[str, Any]]:
        """The raw ``result`` list of the latest answer (empty unless it was a 200)."""
        return _raw_result(self._payload) if self._payload else []


def _by_usable_id(items: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    found = ((usable_update_id(item.get("update_id")), item) for item in items)
    return {update_id: item for update_id, item in found if update_id is not None}


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
    sleep: Sleep = asyncio.sleep
    """How the poller waits out a failure (tests inject one that does not wait)."""
    rng: random.Random | None = None
    """The backoff's jitter (``None``: the module's)."""


class _TokenRejected(Exception):
    """``getUpdates`` refused the token: the loop ends (the health says why)."""


class LongPoller:
    """Fetch → persist → advance offset, until cancelled or the token is rejected."""

    def __init__(
        self,
        bot: Bot,
        inbox: Inbox,
        settings: PollSettings,
        raw: RawUpdates | None = None,
        *,
        health: HealthCell | None = None,
    ) -> None:
        self.bot = bot
        self.inbox = inbox
        self.settings = settings
        self.raw = raw
        self.offset: int | None = None
        self._as_sent: dict[int, dict[str, Any]] = {}
        """The latest batch's updates as Telegram sent them, by (usable) update id."""
        self.health = health or HealthCell("telegram")
        self._sleep = settings.sleep
        self._backoff = Backoff(settings.backoff_initial, settings.backoff_max, rng=settings.rng)

    async def run(self) -> None:
        """Poll until cancelled; returns once the token was rejected (health ``down``)."""
        while True:
            try:
                batch = await self._fetch()
            except _TokenRejected:
                return
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
        if self._backoff.attempt:  # after a failure only
            self._backoff.reset()

    async def _fetch(self) -> Sequence[Fetched]:
        """One ``getUpdates``: its updates, or none after waiting out a failure."""
        # after a failure a short poll answers at once: up is known, not guessed
        timeout = 0 if self.health.value.state == "retrying" else self.settings.timeout
        try:
            updates = await self.bot.get_updates(
                offset=self.offset,
                timeout=timeout,
                allowed_updates=list(self.settings.allowed_updates),
            )
        except InvalidToken as exc:
            self.health.down(TOKEN_REJECTED)
            raise _TokenRejected from exc
        except RetryAfter as exc:
            delay = retry_after_seconds(exc)
            self.health.retrying(f"getUpdates rate limited (429, retry after {delay:g}s)")
            _log.warning("telegram getUpdates rate limited; retrying in %.1fs", delay)
            await self._sleep(delay)
            return ()
        except TelegramError as exc:  # NetworkError (5xx, resets), TimedOut, Conflict (409)
            self.health.retrying(f"getUpdates failed: {preview(exc)}")
            await self._back_off("getUpdates failed", exc)
            return ()
        except Exception as exc:
            return await self._unparsed(exc)
        self._answered()
        if not updates and self._backoff.attempt:
            self._backoff.reset()
        if updates and self.raw is not None:
            self._as_sent = _by_usable_id(self.raw.latest())
        return updates

    async def _unparsed(self, exc: Exception) -> Sequence[Fetched]:
        latest = self.raw.latest() if self.raw is not None else []
        if not latest:
            self.health.retrying(f"getUpdates failed: {preview(exc)}")
            await self._back_off("getUpdates failed", exc)
            return ()
        self._answered()  # Telegram answered; PTB could not read what it said
        _log.debug("telegram: PTB could not read a batch of updates (%s); taking it apart", exc)
        return latest

    def _answered(self) -> None:
        if self.health.value.state != "up":
            self.health.up()

    async def _persist(self, fetched: Fetched) -> int | None:
        """Store one update; its id (None: it has none to confirm it by). Raises when
        storing failed: the offset then stays and the update is fetched again."""
        if isinstance(fetched, Update):
            update_id = usable_update_id(fetched.update_id)
            sent = self._as_sent.pop(update_id, None) if update_id is not None else None
            await self.inbox.accept(fetched, sent)
            return update_id
        return await self.inbox.accept_raw(fetched)

    async def _back_off(self, what: str | None, exc: Exception | None) -> None:
        """Wait ever longer (capped, jittered); ``what`` None: already logged elsewhere
        (debug only)."""
        delay = self._backoff.next()
        why = f" ({preview(exc)})" if exc is not None else ""
        level = logging.DEBUG if what is None else logging.WARNING
        _log.log(level, "telegram %s%s; retrying in %.1fs", what or "store out", why, delay)
        await self._sleep(delay)
