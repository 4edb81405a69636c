"""Stopping a running turn from the chat, and ``/compact`` run in a turn's lane.

:class:`StopButtons` puts a Stop button on each turn's progress message (its press
handled by :mod:`gateway.inbound.dispatch`), registered through the turn's
:class:`TurnStop` when that message is first written; :class:`StoppedTurns` remembers the
turns whose stop was acknowledged, so their reply is suppressed (docs/architecture.md §11);
:func:`compact_now` is ``/compact`` run where the session's turns run, so ``/stop`` ends
it and a message sent meanwhile queues behind it (docs/turn-loop.md §4).
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import Protocol

from adapters.base import Button, ButtonRows, Capabilities
from core.agent.compaction import Compacted
from core.agent.context import ContextUse
from core.agent.control import TurnControl
from core.agent.failure_text import compact_failure
from core.agent.step import NoticeCallback
from core.agent.turn import TurnResult
from core.agent.usage import QuotaReached
from core.approvals import Approvals
from core.bounded import BoundedMap
from core.dispatcher import Dispatcher
from core.model.errors import ModelError
from gateway.control.syntax import STOP_PAYLOAD
from gateway.outbound.messages import NO_LONGER_VALID, NOTHING_TO_COMPACT, compacted, stopped

logger = logging.getLogger(__name__)


class Compacting(Protocol):
    """The agent's side of ``/compact`` (:class:`core.agent.loop.CommonAgent`)."""

    async def compact(
        self, session_key: str, control: TurnControl, on_notice: NoticeCallback | None
    ) -> Compacted | None: ...

    async def context_use(self, session_key: str) -> ContextUse | None: ...


async def compact_now(
    agent: Compacting, key: str, control: TurnControl, on_notice: NoticeCallback | None
) -> TurnResult:
    """``/compact`` run in the session's lane (``UserMessage.command``): its answer as the
    lane's result (no turn id: nothing of it is a turn). ``/stop`` cancels it (``Cancelled``
    raised: the Dispatcher reports it interrupted, the chat already heard "Stopped"); a
    slow summary call tells ``on_notice`` like any model call."""
    try:
        done = await agent.compact(key, control, on_notice)
    except ModelError as error:
        logger.warning("/compact of %s: the summary call failed: %s", key, error)
        reply = compact_failure(error)
    except QuotaReached as reached:  # the summary call would start over a quota
        reply = reached.reply
    else:
        use = await agent.context_use(key) if done is not None else None
        described = use.describe() if use is not None else None
        reply = NOTHING_TO_COMPACT if done is None else compacted(done.summarised, described)
    return TurnResult(
        turn_id="", session_id="", status="completed", exit_reason="text_response",
        reply=reply, iterations=0,
    )  # fmt: skip


STOP_LABEL = "⏹ Stop"
NOT_YOURS = "Sorry — only the person who asked (or an approver) can stop this."
REMEMBERED_STOPS = 10_000


@dataclass(frozen=True, slots=True)
class _StopTarget:
    session_key: str
    control: TurnControl
    requester: str | None


class StopButtons:
    """The Stop button on a turn's progress message: ``/stop`` for that turn only.

    Each running turn gets its own unguessable id (payload ``st:<id>``); a press names the
    turn, never the session, so a press on an old progress message cannot stop a newer turn
    (its id is forgotten when its turn ends: "no longer valid"). Only the requester or an
    approver of the session may press it; the stopped turn's reply is suppressed as after
    ``/stop``."""

    def __init__(self, approvals: Approvals, stopped: StoppedTurns) -> None:
        self._approvals, self._stopped = approvals, stopped
        self._targets: dict[str, _StopTarget] = {}
        """The running turns' stop ids (each forgotten when its turn ends: as many as run)."""

    def register(
        self, session_key: str, control: TurnControl, requester: str | None,
        capabilities: Capabilities,
    ) -> tuple[str, ButtonRows]:  # fmt: skip
        """A new stop id for the turn of ``control`` (the caller forgets it at its end),
        and its Stop button's row for a platform of ``capabilities`` — none when the
        payload would not fit there."""
        stop_id = secrets.token_urlsafe(12)
        self._targets[stop_id] = _StopTarget(session_key, control, requester)
        payload = STOP_PAYLOAD + stop_id
        if len(payload.encode()) > capabilities.button_payload_limit:
            return stop_id, ()
        return stop_id, ((Button(STOP_LABEL, payload, role="stop"),),)

    def forget(self, stop_id: str) -> None:
        self._targets.pop(stop_id, None)

    def press(self, stop_id: str, by: str, dispatcher: Dispatcher) -> str:
        """What the presser is told; stops the turn (in ``dispatcher``, where it runs) when
        ``by`` may and it still runs."""
        target = self._targets.get(stop_id)
        if target is None:
            return NO_LONGER_VALID
        allowed = by == target.requester or by in self._approvals.approvers_of(target.session_key)
        if not allowed:
            return NOT_YOURS
        turn_id = target.control.turn_id
        running = dispatcher.status(target.session_key).turn_id
        if turn_id is None or running != turn_id:
            return NO_LONGER_VALID
        outcome = dispatcher.stop(target.session_key)
        if not outcome:
            return NO_LONGER_VALID
        self._stopped.acknowledge(turn_id)
        self.forget(stop_id)
        return stopped(outcome)


@dataclass(slots=True)
class TurnStop:
    """One turn's Stop button, registered only when the turn's progress message is first
    written (:class:`gateway.turns.progress.ProgressView` asks :meth:`buttons`): a quick
    answer that shows no progress registers none. ``stop_id`` is set once registered; the
    caller forgets it when the turn ends."""

    stops: StopButtons
    session_key: str
    control: TurnControl
    requester: str | None
    capabilities: Capabilities
    stop_id: str | None = None

    def buttons(self) -> ButtonRows:
        self.stop_id, rows = self.stops.register(
            self.session_key, self.control, self.requester, self.capabilities
        )
        return rows


class StoppedTurns(BoundedMap[str, None]):
    """Turns whose ``/stop`` was acknowledged (bounded; oldest forgotten first): their reply
    is suppressed even if it still completed (the stop raced the final answer). Empty (and
    false) while no stop waits for its turn's result, so a result need not ask."""

    def __init__(self, *, capacity: int = REMEMBERED_STOPS) -> None:
        super().__init__(capacity)

    def acknowledge(self, turn_id: str) -> None:
        """``/stop`` told the user this turn stopped: its reply must not follow."""
        self.put(turn_id, None)

    def was_stopped(self, turn_id: str) -> bool:
        """True (once) when a ``/stop`` was acknowledged for ``turn_id``."""
        if turn_id not in self:
            return False
        del self[turn_id]
        return True
