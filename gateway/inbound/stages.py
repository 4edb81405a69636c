"""The inbound fold: every event an adapter delivers passes one list of named stages,
built once when the gateway starts (beside each bot's outbound fold,
:mod:`gateway.outbound.pipeline`).

A stage is ``async (event, next) -> None``: it hands the event (or a changed copy) on with
``await next(event)``, or ends the chain by returning without calling it. The list, in
:data:`ORDER` (docs/architecture.md, "The inbound fold")::

    received        the bot learns the chat's kind, the event is counted; a failure
                    below is logged; the receipt is settled as the sink returns
    cluster_claim   claim-or-forward: the event runs on the process holding its session
                    (PostgreSQL store only, gateway.cluster.sink)
    press           a button press is answered here (it checks access itself)
    access          a stranger, bot chatter or an unmentioned group message stops here;
      access_pairing  the same with pairing on: a stranger DM gets a code (inbound.pairing)
    bot_guard       a bot let in by allow_bots is paced (some platform allows bots)
    link_rekey      a linked person's DM moves into their one session (two platforms or more)
    record          where the session lives, who the sender is (gateway.outbound.directory)
    reactions       the message is remembered for its status reactions ([progress] reactions)
    dispatch        /stop of a platform's Stop control, a command, or text for a turn

A feature that is off is not in the list: no stage, no call. :attr:`Inbound.names` is the
list as built (``commonos check-config`` prints it, the dashboard shows it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from adapters.base import InboundEvent

Next = Callable[[InboundEvent], Awaitable[None]]
"""The rest of the fold, from a stage's place to the last stage."""


class Stage(Protocol):
    async def __call__(self, event: InboundEvent, next: Next) -> None: ...


ORDER = (
    "received", "cluster_claim", "press", "access", "access_pairing", "bot_guard",
    "link_rekey", "record", "reactions", "dispatch",
)  # fmt: skip
"""Where each named stage goes (``access`` and ``access_pairing`` are one place)."""


@dataclass(frozen=True, slots=True)
class Named:
    """A stage and the name the list shows."""

    name: str
    stage: Stage


def fold(stages: Sequence[Named], last: Next) -> Next:
    """``stages[0]`` first, each handing on to the next, the last one to ``last``."""
    for named in reversed(stages):
        last = partial(named.stage, next=last)
    return last


def names(stages: Sequence[Named]) -> tuple[str, ...]:
    return tuple(named.name for named in stages)


class Inbound:
    """The gateway's one inbound fold: :attr:`enter` is the sink every adapter gets."""

    def __init__(self, stages: Sequence[Named], dispatch: Next) -> None:
        shown = names(stages)
        if list(shown) != sorted(shown, key=ORDER.index) or len(set(shown)) != len(shown):
            raise ValueError(f"inbound stages out of order: {shown}")
        self.names: tuple[str, ...] = (*shown, "dispatch")
        self.enter: Next = fold(stages, dispatch)

    async def __call__(self, event: InboundEvent) -> None:
        """``event`` through the whole fold (what an adapter's sink does)."""
        await self.enter(event)


@dataclass(frozen=True, slots=True)
class InboundFeatures:
    """Which optional stages are on (each off one is left out of the list)."""

    cluster: bool = False
    pairing: bool = False
    bot_guard: bool = False
    links: bool = False
    reactions: bool = False

    def names(self) -> tuple[str, ...]:
        """The list these features make (what :class:`Inbound` built from them shows)."""
        optional = {
            "cluster_claim": self.cluster, "bot_guard": self.bot_guard,
            "link_rekey": self.links, "reactions": self.reactions,
            "access": not self.pairing, "access_pairing": self.pairing,
        }  # fmt: skip
        return tuple(name for name in ORDER if optional.get(name, True))
