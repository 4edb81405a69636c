"""``[quotas]``: what a person and a chat may spend on model calls (:mod:`gateway.control.usage`).

``[quotas.person]`` caps each person (the sender, platform-qualified), ``[quotas.chat]``
each chat (every sender's calls there together); each holds ``daily_tokens``,
``monthly_tokens``, ``daily_cost`` and ``monthly_cost`` (any of them; cost in the currency
of the ``[models.<name>]`` prices). Approvers are exempt from both unless
``[quotas.approvers]`` gives them their own person caps. Days and months start at midnight
in ``timezone``. No cap set anywhere: quotas are off and no check runs before a model call.
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from adapters.config import NonNegativeNumber, PositiveInt, PositiveNumber, Section
from adapters.config_reader import Check, got, invalid

Price = NonNegativeNumber
"""A ``[models.<name>]`` price per million tokens (0: free)."""
LIMIT_KEYS = ("daily_tokens", "monthly_tokens", "daily_cost", "monthly_cost")


class QuotaLimits(Section):
    """One set of caps; unset: no cap of that kind."""

    daily_tokens: PositiveInt | None = None
    """Prompt plus completion tokens since midnight."""
    monthly_tokens: PositiveInt | None = None
    """Prompt plus completion tokens since the first of the month."""
    daily_cost: PositiveNumber | None = None
    monthly_cost: PositiveNumber | None = None

    @property
    def any(self) -> bool:
        return any(getattr(self, key) is not None for key in LIMIT_KEYS)


def _known_zone(name: object) -> str:
    """Checked with or without caps: ``/usage``, the dashboard and ``commonos usage``
    place their days in it too."""
    if not isinstance(name, str):
        raise invalid(f"expected an IANA time zone name, {got(name)}")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise invalid(f"unknown time zone {name!r} (expected e.g. Europe/Berlin)") from None
    return name


class QuotasSection(Section):
    timezone: Annotated[str, Check(_known_zone)] = "UTC"
    """Where a day and a month begin (an IANA zone name)."""
    person: QuotaLimits = field(default_factory=QuotaLimits)
    chat: QuotaLimits = field(default_factory=QuotaLimits)
    approvers: QuotaLimits | None = None
    """Approvers' own person caps; unset: approvers are exempt from every quota."""

    @property
    def enabled(self) -> bool:
        """Some cap is set: model calls are checked."""
        own = self.approvers is not None and self.approvers.any
        return self.person.any or self.chat.any or own

    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)
