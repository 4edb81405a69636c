"""A turn whose session lease was taken over: an expected end in a cluster, not a crash.

With several processes on one PostgreSQL store (docs/cluster.md) a turn runs under its
session's lease (:mod:`core.store.fencing`); once another process takes the lease over,
every write of the turn is refused as :class:`~core.store.fencing.Fenced`. The turn then
ends ``failed`` (nothing of it is stored: the record is the new owner's) and the gateway
sends nothing (:mod:`gateway.turns.runner`). :mod:`core.agent.loop` says so once, at
WARNING, naming the lease, without a traceback; every other error keeps its own log.
"""

from __future__ import annotations

import logging

from core.agent.turn_run import TurnEnd
from core.store.fencing import Fenced

logger = logging.getLogger("core.agent.loop")
"""The turn loop's logger: the line belongs with the turn's other lines."""


def lease_lost_end(what: str, error: BaseException, reply: str) -> TurnEnd | None:
    """How ``what`` (``"turn <id>"``) ends when ``error`` says its lease was lost — a
    ``Fenced``, or a task group's (parallel tool calls) holding only ``Fenced`` — after its
    one WARNING line: ``failed`` with ``reply`` (the loop's crash reply, never sent by the
    gateway), as any refused write leaves it. None for any other error."""
    lost = fenced_in(error)
    if lost is None:
        return None
    log_lease_lost(what, lost)
    return TurnEnd("failed", "crashed", reply, f"{type(lost).__name__}: {lost}")


def fenced_in(error: BaseException) -> Fenced | None:
    """The refused write ``error`` is, or the first of a group made only of them."""
    if isinstance(error, Fenced):
        return error
    if isinstance(error, BaseExceptionGroup):
        refused, rest = error.split(Fenced)
        if refused is not None and rest is None:
            return fenced_in(refused.exceptions[0])
    return None


def log_lease_lost(what: str, lost: Fenced) -> None:
    """The one line for ``what`` that lost its session's lease: no traceback."""
    fence = lost.fence
    logger.warning(
        "%s stopped: lease %s (epoch %d) was taken over by another process; its writes are "
        "refused and it ends without a reply from here", what, fence.lease, fence.epoch,
    )  # fmt: skip


def is_lease_lost(end: TurnEnd) -> bool:
    """``end`` was made by :func:`lease_lost_end` (its line was already logged)."""
    return end.error is not None and end.error.startswith(f"{Fenced.__name__}: ")
