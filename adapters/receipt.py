"""The receipt an inbound event carries: how its handling ended.

It travels with the event (:attr:`adapters.base.InboundEvent.receipt`); the durable inbox
that stored the item awaits it and marks the item done only when it says True
(:mod:`adapters.inbox`, ``docs/architecture.md`` §3 step 10). The sink (the gateway's
router) either handles the event whole before it returns — a command, a press, a folded
or refused message: the receipt is settled True as the sink returns
(:meth:`Receipt.sink_returned`) — or has it :meth:`~Receipt.follow` the work that goes on
after: a turn, whose outcome is True once its reply was delivered (or the queued message
was dropped by ``/stop``) and False when a shutdown cut it short, so the item replays.
"""

from __future__ import annotations

import asyncio


class Receipt:
    """Open until settled; the first settlement wins. Made outside an event loop too (it
    is a plain value's field)."""

    __slots__ = ("_delivered", "_followed", "_over")

    def __init__(self) -> None:
        self._over = asyncio.Event()
        self._delivered = False
        self._followed = False

    def settle(self, delivered: bool) -> None:
        """The handling is over: ran to its end (True) or was cut short (False)."""
        if not self._over.is_set():
            self._delivered = delivered
            self._over.set()

    def follow(self, outcome: asyncio.Future[bool]) -> None:
        """Settle with ``outcome`` once it is done (cancelled or failed: False)."""
        self._followed = True
        outcome.add_done_callback(self._settle_from)

    def sink_returned(self) -> None:
        """The sink is done with the event: settled True unless it follows an outcome."""
        if not self._followed:
            self.settle(True)

    @property
    def settled(self) -> bool:
        return self._over.is_set()

    async def wait(self) -> bool:
        """Until settled; True when the handling ran to its end."""
        await self._over.wait()
        return self._delivered

    def _settle_from(self, outcome: asyncio.Future[bool]) -> None:
        ok = not outcome.cancelled() and outcome.exception() is None
        self.settle(ok and outcome.result())
