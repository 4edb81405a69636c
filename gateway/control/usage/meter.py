"""The gateway's :class:`core.agent.usage.UsageMeter`: every model call recorded, priced
and counted; the quota asked before each call when ``[quotas]`` sets a cap.

A call's row (:class:`core.store.usage.UsageRow`) names the person (the sender,
platform-qualified), the chat (the session key; a child agent's is its parent's, a
per-member group session's is the group's), the profile and the model preset (the
``[models.<name>]`` whose ``model`` the call asked for; else the model's own name). Its
cost comes from that preset's prices (none: no cost). A store that fails to record is
logged, never the turn's failure.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from core.agent.scope import TurnScope
from core.agent.usage import ModelSpend
from core.store.usage import UsageBook, UsageRow
from core.types import Usage
from gateway.control.usage.quota import QuotaRule

logger = logging.getLogger(__name__)

CHILD_MARK = "/child:"


@dataclass(frozen=True, slots=True)
class Price:
    """Per million tokens; ``cached`` None: cached input costs ``input``."""

    input: float = 0.0
    cached: float | None = None
    output: float = 0.0

    def cost(self, usage: Usage) -> float:
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        fresh = usage.prompt_tokens - cached
        cached_price = self.input if self.cached is None else self.cached
        total = fresh * self.input + cached * cached_price + usage.completion_tokens * self.output
        return total / 1_000_000


@dataclass(frozen=True, slots=True)
class Preset:
    """A model preset's name and price (None: unpriced)."""

    name: str
    price: Price | None = None


class UsageCounter(Protocol):
    """Where a recorded call is counted besides the store (``/metrics``)."""

    def count(self, profile: str, model: str, usage: Usage, cost: float | None) -> None: ...


def chat_of(session_key: str, person: str | None) -> str:
    """The chat a call is counted to: the session key without a child agent's part, and
    without the member's id of a per-member group session."""
    key = session_key.partition(CHILD_MARK)[0]
    parts = key.split(":")
    if person is not None and len(parts) > 3 and parts[1] != "dm":
        platform, _, user = person.partition(":")
        if parts[0] == platform and parts[-1] == user:
            return ":".join(parts[:-1])
    return key


class GatewayMeter:
    """One profile's meter (``CommonAgent(meter=...)``)."""

    def __init__(
        self,
        book: UsageBook,
        profile: str,
        presets: Mapping[str, Preset],
        *,
        quotas: QuotaRule | None = None,
        counter: UsageCounter | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._book = book
        self._profile = profile
        self._presets = presets
        """By the model name a call asks for."""
        self._quotas = quotas
        self.limited = quotas is not None
        """A quota is set: each call is admitted first (else :meth:`admit` is not asked)."""
        self._counter = counter
        self._clock = clock

    async def admit(self, scope: TurnScope) -> None:
        if self._quotas is not None:
            await self._quotas.admit(scope, chat_of(scope.session_key, scope.requested_by))

    async def record(self, spend: ModelSpend) -> None:
        preset = self._presets.get(spend.model) or Preset(spend.model)
        usage, scope = spend.usage, spend.scope
        cost = preset.price.cost(usage) if preset.price is not None else None
        row = UsageRow(
            at=self._clock(), person=scope.requested_by,
            chat=chat_of(scope.session_key, scope.requested_by), profile=self._profile,
            model=preset.name, session_key=scope.session_key, turn_id=scope.turn_id,
            prompt_tokens=usage.prompt_tokens, cached_tokens=usage.cached_tokens,
            completion_tokens=usage.completion_tokens, estimated=usage.estimated, cost=cost,
        )  # fmt: skip
        if self._counter is not None:
            self._counter.count(self._profile, preset.name, usage, cost)
        try:
            await self._book.add(row)
        except Exception:
            logger.exception("turn %s: model usage not recorded", scope.turn_id)
