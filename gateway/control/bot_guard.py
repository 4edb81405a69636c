"""The bot-loop guard: at most N exchanges a minute between this gateway and one other bot.

A bot let in by ``allow_bots`` (README.md, "Bots in chats") may still answer us, and we it,
forever: two agents replying to each other is a loop that only the owners' patience ends.
The guard counts every admitted message from a bot, per *pair* — this gateway's bot on a
platform and that other bot — over a sliding minute. The message that goes over
``bot_exchanges_per_minute`` is not answered: the chat gets one notice and the pair is
muted for ``bot_mute_seconds``, during which everything that bot sends is ignored in
silence. When the mute ends the count starts again from zero.

Humans are never counted. Time is read from an injected clock (``time.monotonic`` in
production, the test clock in tests).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from adapters.base import InboundEvent
from adapters.config import BOT_EXCHANGES_PER_MINUTE, BOT_MUTE_SECONDS
from core.bounded import BoundedMap
from gateway.inbound.stages import Next

Say = Callable[[InboundEvent, str], Awaitable[None]]
"""Tell the event's chat something (the one notice of a muted pair)."""

BotVerdict = Literal["pass", "notice", "muted"]
"""``pass``: answer it; ``notice``: the pair just went over, say :func:`muted_notice`
once and answer nothing; ``muted``: ignore it in silence."""

WINDOW_SECONDS = 60.0
PAIRS_CAPACITY = 1000
"""Bot pairs remembered (least recently seen forgotten first)."""


@dataclass(frozen=True, slots=True)
class BotLimits:
    """One platform's ``bot_exchanges_per_minute`` and ``bot_mute_seconds``."""

    exchanges_per_minute: int = BOT_EXCHANGES_PER_MINUTE
    mute_seconds: float = BOT_MUTE_SECONDS


@dataclass(slots=True)
class _Pair:
    seen: deque[float] = field(default_factory=deque)
    muted_until: float = 0.0


class BotGuard:
    """Counts the exchanges of each bot pair; ``limits_for(platform)`` gives the limits."""

    def __init__(
        self,
        limits_for: Callable[[str], BotLimits],
        clock: Callable[[], float] = time.monotonic,
        say: Say | None = None,
    ) -> None:
        self._limits_for, self._clock, self._say = limits_for, clock, say
        self._pairs: BoundedMap[tuple[str, str], _Pair] = BoundedMap(PAIRS_CAPACITY)

    def check(self, event: InboundEvent) -> BotVerdict:
        """What to do with an admitted ``event``; a human's is always ``pass``."""
        if not event.sender.is_bot:
            return "pass"
        limits, now = self._limits_for(event.platform), self._clock()
        pair = self._pair((event.platform, event.sender.id))
        if now < pair.muted_until:
            return "muted"
        while pair.seen and now - pair.seen[0] >= WINDOW_SECONDS:
            pair.seen.popleft()
        if len(pair.seen) < limits.exchanges_per_minute:
            pair.seen.append(now)
            return "pass"
        pair.seen.clear()
        pair.muted_until = now + limits.mute_seconds
        return "notice"

    async def pace(self, event: InboundEvent, next: Next) -> None:
        """Stage ``bot_guard`` (only when some platform has ``allow_bots``): a human's
        event goes on; a bot's goes on while its pair is under the limit, the one that
        mutes the pair gets the notice, the rest end here in silence."""
        verdict = self.check(event)
        if verdict == "pass":
            await next(event)
        elif verdict == "notice" and self._say is not None:
            await self._say(event, muted_notice(event, self._limits_for(event.platform)))

    def _pair(self, key: tuple[str, str]) -> _Pair:
        pair = self._pairs.get(key)
        if pair is None:
            pair = _Pair()
        self._pairs.put(key, pair)
        return pair


def muted_notice(event: InboundEvent, limits: BotLimits) -> str:
    """The one notice a chat gets when a bot pair goes over its limit."""
    minutes = max(1, round(limits.mute_seconds / 60))
    return (
        f"🤖 Too many exchanges with the bot {event.sender.name}: more than "
        f"{limits.exchanges_per_minute} in a minute. I will ignore it for {minutes} min."
    )
