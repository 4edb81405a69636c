"""What the Dispatcher holds per busy session key (:mod:`core.dispatcher`): its
:class:`Lane` (the queue, the running turn, the debounce window) and the :class:`Entry`
of each message waiting for or running its turn (docs/turn-loop.md).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

from core.agent.control import TurnControl
from core.agent.turn import UserMessage
from core.debounce import Window, merged


@dataclass(frozen=True, slots=True)
class Entry:
    """A message waiting for (or running) its turn, and the future of how it ended (none
    for a leftover: nobody waits for it); ``also``: those of messages merged into it."""

    message: UserMessage
    handled: asyncio.Future[bool] | None = None
    also: tuple[asyncio.Future[bool] | None, ...] = ()

    def settle(self, handled: bool) -> None:
        for future in (self.handled, *self.also):
            if future is not None and not future.done():
                future.set_result(handled)


def batch(entries: list[Entry]) -> Entry:
    """The gathered entries as one: the merged message, every ``handled`` following it."""
    first, *rest = entries
    if not rest:
        return first
    message = merged([e.message for e in entries])
    return Entry(message, first.handled, tuple(e.handled for e in rest))


@dataclass(slots=True)
class Lane:
    """Everything the Dispatcher holds for one busy key; dropped when the key goes idle."""

    queue: deque[Entry] = field(default_factory=deque)
    control: TurnControl | None = None
    since: float | None = None
    running: UserMessage | None = None
    """The message of the running turn."""
    worker: asyncio.Task[None] | None = None
    urgent: int = 0
    """How many messages at the front of ``queue`` jumped the backlog (interrupters,
    leftovers); the next one goes right behind them."""
    window: Window | None = None
    """The debounce window gathering ``gathered`` before the first turn; None: none."""
    gathered: list[Entry] = field(default_factory=list)

    def drop_gathered(self, handled: bool) -> int:
        """Settle and forget the gathered messages; how many there were."""
        for entry in self.gathered:
            entry.settle(handled)
        count, self.gathered = len(self.gathered), []
        return count

    def push_front(self, entry: Entry) -> int:
        """Queue ``entry`` behind the other urgent ones; its 1-based position."""
        self.queue.insert(self.urgent, entry)
        self.urgent += 1
        return self.urgent

    def pop(self) -> Entry:
        self.urgent = max(0, self.urgent - 1)
        return self.queue.popleft()

    def clear(self, handled: bool) -> None:
        """Drop the queue; each dropped message ended ``handled`` (``stop``: True)."""
        for entry in self.queue:
            entry.settle(handled)
        self.queue.clear()
        self.urgent = 0
