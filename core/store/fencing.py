"""Fencing: a write made for a lease is refused once that lease is no longer ours.

Several gateway processes share one PostgreSQL store (docs/cluster.md). A bot and a
session are each owned through a lease (table ``leases``: name, owner, epoch,
expires_at): the owner renews it, and when it stops renewing (killed, paused, cut off)
another process takes it over with ``epoch + 1``. A process that was only paused wakes up
still believing it owns what it owned; every write it then makes must be refused. So the
work done for a lease runs inside :func:`fenced` (a context variable, inherited by the
tasks that work starts), and the PostgreSQL store checks the fence *in the same
transaction* as each write: the lease row still has this owner and epoch and has not
expired (``SELECT ... FOR SHARE``, so a takeover waits for the write to commit and the
write never lands after one). A refused write raises :class:`Fenced`.

The SQLite store is one process's (its file is locked), so it has nothing to fence and
ignores the fence.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from core.store.base import StoreError


@dataclass(frozen=True, slots=True)
class Fence:
    """The lease a piece of work holds: its name (``bot:<platform>:<id>`` or
    ``session:<session key>``), this process's id, and the epoch it was granted."""

    lease: str
    owner: str
    epoch: int


class Fenced(StoreError):
    """A write for a lease this process no longer holds (taken over, or expired): refused,
    nothing written. The work it belonged to must end without a trace."""

    def __init__(self, fence: Fence) -> None:
        super().__init__(
            f"write refused: lease {fence.lease} (epoch {fence.epoch}) is no longer held "
            f"by {fence.owner}"
        )
        self.fence = fence


_current: ContextVar[Fence | None] = ContextVar("commonos_fence", default=None)


def current_fence() -> Fence | None:
    """The fence of the work running in this context, if any."""
    return _current.get()


@contextmanager
def fenced(fence: Fence | None) -> Iterator[None]:
    """Run the block (and every task it starts) under ``fence``; None: unfenced."""
    token = _current.set(fence)
    try:
        yield
    finally:
        _current.reset(token)
