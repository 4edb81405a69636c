"""Turns whose ``/stop`` was acknowledged (bounded; oldest forgotten first).

When ``/stop`` (or a progress message's Stop button) answered "Stopped" for a turn, that
turn's reply is suppressed even if it still completed (the stop raced the final answer):
the chat commands :meth:`~StoppedTurns.acknowledge` it, the reply sender asks
:meth:`~StoppedTurns.was_stopped` before delivering.
"""

from __future__ import annotations

from core.bounded import BoundedMap

REMEMBERED = 10_000


class StoppedTurns:
    def __init__(self, *, capacity: int = REMEMBERED) -> None:
        self._stopped: BoundedMap[str, None] = BoundedMap(capacity)

    def acknowledge(self, turn_id: str) -> None:
        """``/stop`` told the user this turn stopped: its reply must not follow."""
        self._stopped.put(turn_id, None)

    def was_stopped(self, turn_id: str) -> bool:
        """True (once) when a ``/stop`` was acknowledged for ``turn_id``."""
        if turn_id not in self._stopped:
            return False
        del self._stopped[turn_id]
        return True
