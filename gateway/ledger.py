"""What the router and the reply sender share about turns (bounded; oldest forgotten first).

* **Origins.** A message that becomes a turn carries the inbound update it came from
  (``UserMessage.origin``, ``"<platform>:<update id>"``). The router :meth:`expect`\\s it
  before submitting; the reply sender :meth:`settle`\\s it once that turn's result was
  delivered (True), or when a shutdown cut the turn short (False). An adapter with a durable
  inbox marks exactly that update done then (``GatewayService.update_settled``).
* **Stopped turns.** When ``/stop`` answered "Stopped" for a turn, that turn's reply is
  suppressed even if it still completed (the stop raced the final answer).
"""

from __future__ import annotations

import asyncio

from core.bounded import BoundedMap

REMEMBERED = 10_000


def origin_of(platform: str, update_id: str) -> str:
    """The ``UserMessage.origin`` of an inbound update."""
    return f"{platform}:{update_id}"


class TurnLedger:
    def __init__(self, *, capacity: int = REMEMBERED) -> None:
        self._origins: BoundedMap[str, asyncio.Future[bool]] = BoundedMap(capacity)
        self._stopped: BoundedMap[str, None] = BoundedMap(capacity)

    # origins ------------------------------------------------------------------------
    def expect(self, origin: str) -> None:
        """A turn will carry ``origin``; its outcome is open until :meth:`settle`."""
        self._origins.put(origin, asyncio.get_running_loop().create_future())

    def settle(self, origin: str | None, finished: bool) -> None:
        """The turn carrying ``origin`` is over: ran to its end (True) or was cut short."""
        future = self._origins.get(origin) if origin else None
        if future is not None and not future.done():
            future.set_result(finished)

    def outcome(self, origin: str) -> asyncio.Future[bool] | None:
        """The outcome of ``origin``'s turn; None when no turn carries it."""
        return self._origins.get(origin)

    def forget(self, origin: str) -> None:
        self._origins.pop(origin, None)

    # stopped turns ------------------------------------------------------------------
    def stop_acknowledged(self, turn_id: str) -> None:
        """``/stop`` told the user this turn stopped: its reply must not follow."""
        self._stopped.put(turn_id, None)

    def was_stopped(self, turn_id: str) -> bool:
        """True (once) when a ``/stop`` was acknowledged for ``turn_id``."""
        if turn_id not in self._stopped:
            return False
        del self._stopped[turn_id]
        return True
