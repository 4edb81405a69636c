"""Usage and quotas in the gateway (issue 33, README "Usage and quotas").

:class:`UsageFeature` gives each profile's agent a :class:`gateway.control.usage.meter.GatewayMeter`
(every model call recorded in ``model_usage``, priced from ``[models.<name>]``, counted on
``/metrics`` by profile and model; the ``[quotas]`` check before each call when a cap is
set — no cap: no check, no read), gives the dashboard its usage figures
(:mod:`gateway.control.usage.panel`) and answers ``/usage``: the asker's tokens and cost today
and this month; for an approver also the month's top people and chats.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from adapters.base import InboundEvent
from core.store.base import Store
from core.store.jobs import StatementRunner
from core.store.usage import UsageBook
from gateway.config.quotas import QuotasSection
from gateway.config.schema import Config
from gateway.control.access import qualified
from gateway.control.commands import CommandHandler, Reply
from gateway.control.usage.meter import GatewayMeter, Preset, Price, UsageCounter
from gateway.control.usage.panel import UsagePanel
from gateway.control.usage.quota import QuotaRule, Window
from gateway.control.usage.report import figures, ranking

Approvers = Callable[[str], Collection[str]]
TOP = 5


def presets_of(config: Config) -> dict[str, Preset]:
    """Each ``[models.<name>]``, by the model name its calls ask for."""
    found: dict[str, Preset] = {}
    for name, section in config.models.items():
        priced = (section.price_input_per_mtok, section.price_output_per_mtok)
        price = None
        if any(p is not None for p in (*priced, section.price_cached_input_per_mtok)):
            price = Price(
                section.price_input_per_mtok or 0.0,
                section.price_cached_input_per_mtok,
                section.price_output_per_mtok or 0.0,
            )
        found.setdefault(section.model, Preset(name, price))
    return found


@dataclass(frozen=True, slots=True)
class UsageFeature:
    book: UsageBook
    presets: Mapping[str, Preset]
    quotas: QuotasSection
    counter: UsageCounter | None = None
    clock: Callable[[], float] = time.time

    @classmethod
    def of(
        cls, store: Store, config: Config, counter: UsageCounter | None = None
    ) -> UsageFeature | None:
        """The feature over ``store``; None for a store that runs no feature statements."""
        if not isinstance(store, StatementRunner):
            return None
        return cls(UsageBook(store), presets_of(config), config.quotas, counter)

    def meter(self, profile: str, approvers: Approvers) -> GatewayMeter:
        rule = None
        if self.quotas.enabled:
            rule = QuotaRule(self.quotas, self.book, approvers, self.clock)
        return GatewayMeter(
            self.book, profile, self.presets, quotas=rule, counter=self.counter, clock=self.clock
        )

    def panel(self) -> UsagePanel:
        """The dashboard's usage figures (totals by profile and model, never by person)."""
        return UsagePanel(self.book, self.quotas.zone(), now=self.clock)

    def commands(self, approvers: Approvers) -> dict[str, CommandHandler]:
        return {"usage": UsageCommand(self, approvers).command}


@dataclass(frozen=True, slots=True)
class UsageCommand:
    feature: UsageFeature
    approvers: Approvers

    async def command(self, event: InboundEvent, session_key: str, args: str) -> Reply:
        me = qualified(event.platform, event.sender.id)
        feature = self.feature
        window = Window.at(feature.clock(), feature.quotas.zone())
        book = feature.book
        lines = [
            "📊 Your model usage",
            f"Today: {figures(await book.totals(window.day_start, me))}",
            f"This month: {figures(await book.totals(window.month_start, me))}",
        ]
        if me in self.approvers(session_key):
            people = await book.top("person", window.month_start, TOP)
            chats = await book.top("chat", window.month_start, TOP)
            everyone = await book.totals(window.month_start)
            lines += ["", f"Everyone this month: {figures(everyone)}"]
            lines += ranking("Top people this month:", people)
            lines += ranking("Top chats this month:", chats)
        return "\n".join(lines)
