"""The Dispatcher: one running turn per session key, and a control plane that never waits.

``submit(key, message)`` is a plain call: it starts, queues or folds in the message and
returns a :class:`SubmitOutcome` at once; the turn runs in a per-key worker task. While a
key is busy, a new message is handled by that key's :data:`~core.agent.profile.BusyPolicy`:

* ``queue`` — FIFO, capped at ``queue_limit``; each message becomes its own turn;
* ``interrupt`` — the running turn is stopped with reason ``interrupted_by_user`` and the
  message is put at the front of the queue to run next — ahead of ``/queue``'d backlog,
  behind earlier interrupters still waiting (several interrupters run in arrival order);
* ``steer`` — the text is folded into the running turn (``TurnControl.steer``). When no
  turn is in flight (between turns, delivering a reply, or already stopping) it is queued,
  so a steer never vanishes into a turn that is ending.

**Leftovers.** A steer or redirect the turn never delivered to the model (it ended with
no further tool batch, or it ran on an external runtime) is not lost: when ``run_turn``
returns, the worker drains it from the turn's control (``TurnControl.drain_leftovers``)
and queues it at the front (behind waiting interrupters) as a new :class:`UserMessage`
from the same sender, so it runs as the next turn. Leftovers are dropped — like the
queue — only when the turn was ended by ``stop`` with ``stop_clears_queue``, or on
``aclose``.

``stop``/``steer``/``redirect``/``status`` act on the running turn immediately, from any
task. ``stop(key)`` cancels the running turn with reason ``cancelled`` and, when the key's
``stop_clears_queue`` is on (the default; the profile's ``stop_clears_queue``), also drops
that key's queued messages: a user who types ``/stop`` wants the agent to be quiet, not to
start on the next backlog item. With it off the queue stays and its next message runs.
Either way ``stop`` returns a :class:`StopOutcome` — whether a turn was stopped, how many
queued messages were dropped and how many will still run — which ``/stop`` words to the
chat (``docs/turn-loop.md`` §13).

Per busy key the Dispatcher holds a :class:`Lane` (the queue of :class:`Entry` values, the
running turn, the debounce window), dropped when the key goes idle; the state machine is::

    (absent) --submit--> running --turn ends, queue empty--> (absent: evicted)
                          ^   |
                          +---+ turn ends, queue not empty: next message

A worker delivers each result through ``on_result(key, message, result)`` before taking
the next message, so replies go out in order. A turn that raises is logged and reported as
a ``failed``/``crashed`` :class:`TurnResult` (empty ``turn_id``; one that raises
``Cancelled`` is reported ``interrupted``/``cancelled``); the key is released and the next
queued message runs. ``wait_idle(key)`` waits for a key to drain; ``aclose()`` stops every
turn (reason ``shutdown``), drops the queues and waits (time-boxed) for the workers.

**Handled.** Every outcome carries ``handled``, a future that says how the message ended —
what a durable inbox waits for before it marks the inbound item done (the gateway hands it
to the event's receipt, ``docs/architecture.md`` §3 step 10)::

    True   its turn ran and ``on_result`` returned (its reply delivered, or suppressed),
           it was folded into the running turn (steered), refused as the queue was full,
           or dropped from the queue by ``stop`` — handled for good, never replayed
    False  a shutdown cut it short: refused while shutting down, dropped by ``aclose``,
           its turn interrupted by ``aclose``, or ``on_result`` raised or was cancelled

**Debounce.** With the key's ``debounce`` window (seconds; the profile's
``debounce_ms``, 0 = off; ``debounce=None``: no key debounces, none is asked) a message
submitted with ``merge=True`` (the router's plain text messages; never commands, presses
or a forced ``policy``) to an idle key does not start at once: it gathers the same
person's next messages for the window and they run as ONE turn (:mod:`core.debounce`);
each joining message's outcome is ``merged`` and its ``handled`` follows that one turn.
``stop`` during the window never waits for it: it drops the gathered messages (handled
True, like a cleared queue), or with ``stop_clears_queue`` off runs them at once
(docs/turn-loop.md §20).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Literal

from core import tracing
from core.agent.control import TurnControl
from core.agent.profile import BusyPolicy
from core.agent.turn import TurnResult, UserMessage
from core.cancellation import Cancelled
from core.debounce import REAL_TIME, Pace, Window, joins, merged
from core.per_key import PerKey, per_key
from core.tasks import TaskSet
from core.types import ExitReason, TurnStatus

logger = logging.getLogger(__name__)

RunTurn = Callable[[str, UserMessage, TurnControl], Awaitable[TurnResult]]
"""The port to the turn loop: ``run_turn(session_key, message, control)``."""

ResultObserver = Callable[[str, UserMessage, TurnResult], Awaitable[None]]
"""Receives every finished turn (the gateway sends the reply from here)."""

SubmitKind = Literal[
    "started",
    "queued",
    "steered",
    "interrupted_and_queued",
    "rejected_queue_full",
    "rejected_shutting_down",
    "merged",
]

OWN_TURN = frozenset({"started", "queued", "interrupted_and_queued", "merged"})
"""Submit outcomes after which the message runs in a turn (its own, or one it joined)."""

SHUTDOWN_GRACE_SECONDS = 5.0
"""How long ``aclose`` lets stopped turns finish before cancelling their workers."""


@dataclass(frozen=True, slots=True)
class SubmitOutcome:
    kind: SubmitKind
    position: int = 0
    """1-based place in the queue for ``queued`` / ``interrupted_and_queued``; else 0."""
    handled: asyncio.Future[bool] | None = field(default=None, compare=False, repr=False)
    """How the message ended (module docstring, "Handled"); always set by ``submit``."""


@dataclass(frozen=True, slots=True)
class StopOutcome:
    """What :meth:`Dispatcher.stop` did; false when there was nothing to stop."""

    stopped: bool = False
    """A running turn was cancelled."""
    dropped: int = 0
    """Queued messages dropped (``stop_clears_queue`` on): they will not run."""
    kept: int = 0
    """Queued messages left in the queue (``stop_clears_queue`` off): they run next."""

    def __bool__(self) -> bool:
        return self.stopped or self.dropped > 0


@dataclass(frozen=True, slots=True)
class SessionStatus:
    running: bool
    since: float | None = None
    """When the running turn started (the Dispatcher's clock); None when idle."""
    queue_length: int = 0
    turn_id: str | None = None
    """The running turn's id (``TurnControl.turn_id``), once the loop has set it."""
    sender_id: str | None = None
    """Who asked for the running turn (its message's ``sender_id``); None when idle."""
    sender_name: str | None = None
    gathering: int = 0
    """Messages gathered in a debounce window, waiting to run as one turn."""


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


class Dispatcher:
    def __init__(
        self,
        run_turn: RunTurn,
        *,
        policy_for: PerKey[BusyPolicy] = "queue",
        queue_limit: PerKey[int] = 20,
        on_result: ResultObserver | None = None,
        stop_clears_queue: PerKey[bool] = True,
        clock: Callable[[], float] = time.time,
        debounce: PerKey[float] | None = None,
        debounce_pace: Pace = REAL_TIME,
    ) -> None:
        self._run_turn = run_turn
        self._policy: Callable[[str], BusyPolicy] = per_key(policy_for)
        self._limit: Callable[[str], int] = per_key(queue_limit)
        self.on_result = on_result
        """Told each finished turn; a feature may wrap it before the first turn (the
        gateway's ``[schedule]`` watches its turns' results: ``GatewayService.result_hook``)."""
        self._stop_clears_queue: Callable[[str], bool] = per_key(stop_clears_queue)
        self._clock, self._pace = clock, debounce_pace
        self._debounce: Callable[[str], float] | None = per_key(debounce) if debounce else None
        """None (or 0): no key debounces — a message is never asked for its window."""
        self._lanes: dict[str, Lane] = {}
        self._workers = TaskSet(logger)
        self._closing = False

    # submitting ----------------------------------------------------------------
    def submit(
        self,
        session_key: str,
        message: UserMessage,
        *,
        policy: BusyPolicy | None = None,
        merge: bool = False,
    ) -> SubmitOutcome:
        """Start, queue or fold in ``message`` and return at once (call it from the event
        loop); the outcome's ``handled`` resolves when the message has ended.

        ``policy`` overrides the session's busy policy for this message (``/queue`` forces
        ``"queue"`` whatever the profile says). ``merge``: a plain text message that may
        wait in the key's debounce window (module docstring, "Debounce").
        """
        entry = Entry(message, asyncio.get_running_loop().create_future())
        debounce = self._debounce
        window = debounce(session_key) if debounce and merge and policy is None else 0.0
        outcome = self._place(session_key, entry, policy, window)
        if outcome.kind not in OWN_TURN:
            entry.settle(outcome.kind != "rejected_shutting_down")
        return SubmitOutcome(outcome.kind, outcome.position, entry.handled)

    def _place(
        self, session_key: str, entry: Entry, policy: BusyPolicy | None, window: float
    ) -> SubmitOutcome:
        if self._closing:
            return SubmitOutcome("rejected_shutting_down")
        lane = self._lanes.get(session_key)
        if lane is None:
            self._start(session_key, entry, window)
            return SubmitOutcome("started")
        if lane.window is not None and not lane.window.closed:
            if window > 0 and joins([e.message for e in lane.gathered], entry.message):
                lane.gathered.append(entry)
                lane.window.extend()
                return SubmitOutcome("merged")
            lane.window.close()  # the gathered turn starts now; this message goes after it
        policy = policy or self._policy(session_key)
        running = _live(lane.control)
        if policy == "steer" and running is not None:
            running.steer(entry.message.text)
            return SubmitOutcome("steered")
        if len(lane.queue) >= self._limit(session_key):
            return SubmitOutcome("rejected_queue_full")
        if policy == "interrupt":
            position = lane.push_front(entry)
            if running is None:
                return SubmitOutcome("queued", position)
            running.stop("interrupted_by_user")
            return SubmitOutcome("interrupted_and_queued", position)
        lane.queue.append(entry)
        return SubmitOutcome("queued", len(lane.queue))

    def _start(self, session_key: str, entry: Entry, window: float) -> None:
        lane = Lane()
        if window > 0:
            lane.window = Window(window, self._pace)
            lane.gathered = [entry]
        self._lanes[session_key] = lane
        work = self._work(session_key, lane, entry)
        lane.worker = self._workers.spawn(work, name=f"dispatcher:{session_key}")

    # the worker ------------------------------------------------------------------
    async def _work(self, session_key: str, lane: Lane, first: Entry) -> None:
        entry: Entry | None = first
        try:
            if lane.window is not None:
                entry = None
                entry = await self._gather(lane)
            while entry is not None:
                traced: AbstractContextManager[tracing.Span | None] = (
                    nullcontext()
                    if tracing.tracer is None
                    else _turn_span(session_key, entry.message)
                )  # telemetry off: no span
                with traced as span:
                    result = await self._run_one(session_key, lane, entry.message)
                    if span is not None:
                        span.set("turn.id", result.turn_id or None)
                        span.set("turn.status", result.status)
                    delivered = await self._deliver(session_key, entry.message, result)
                cut_short = self._closing and result.status == "interrupted"
                entry.settle(delivered and not cut_short)
                entry = self._next(lane)
        finally:
            if lane.gathered:  # cancelled in the window
                lane.drop_gathered(False)
            if entry is not None:
                entry.settle(False)  # the worker was cancelled mid-turn or mid-delivery
            # No await between the empty-queue check and eviction: a concurrent submit
            # either landed in the queue (and was taken) or finds the key absent.
            if self._lanes.get(session_key) is lane:
                del self._lanes[session_key]

    async def _gather(self, lane: Lane) -> Entry | None:
        """Wait out the debounce window; its messages as one entry (None: ``stop`` dropped
        them, or a shutdown came, which settles them False)."""
        assert lane.window is not None
        await lane.window.wait()
        lane.window = None
        if self._closing:
            lane.drop_gathered(False)
        entries, lane.gathered = lane.gathered, []
        return batch(entries) if entries else self._next(lane)

    def _next(self, lane: Lane) -> Entry | None:
        if self._closing or not lane.queue:
            return None
        return lane.pop()

    async def _run_one(self, session_key: str, lane: Lane, message: UserMessage) -> TurnResult:
        lane.control = control = TurnControl()
        lane.since, lane.running = self._clock(), message
        try:
            return await self._run_turn(session_key, message, control)
        except Cancelled as exc:
            # The loop should report a stop as a result; tolerate one that raises it.
            return _crashed(exc, status="interrupted", exit_reason="cancelled")
        except Exception as exc:
            logger.exception("turn for %s raised; session released", session_key)
            return _crashed(exc)
        finally:
            lane.control, lane.since, lane.running = None, None, None
            if control.redirects or control.steers:  # a steer or redirect never delivered
                self._keep_leftovers(session_key, lane, message, control)

    def _keep_leftovers(
        self, session_key: str, lane: Lane, message: UserMessage, control: TurnControl
    ) -> None:
        """Queue what the turn never delivered as the next turn (see the module docstring)."""
        text = control.drain_leftovers()
        if text is None:
            return
        stopped = control.token.reason == "cancelled" and self._stop_clears_queue(session_key)
        if self._closing or stopped:
            logger.info("%s: dropped an undelivered steer/redirect (turn stopped)", session_key)
            return
        lane.push_front(Entry(UserMessage(text, message.sender_id, message.sender_name)))

    async def _deliver(self, session_key: str, message: UserMessage, result: TurnResult) -> bool:
        """Hand ``result`` to ``on_result``; False when it raised (the reply not delivered)."""
        if self.on_result is None:
            return True
        try:
            await self.on_result(session_key, message, result)
        except Exception:
            logger.exception("on_result for %s failed; reply not delivered", session_key)
            return False
        return True

    # control plane (never queued) ------------------------------------------------
    def stop(self, session_key: str) -> StopOutcome:
        """Cancel the running turn (reason ``cancelled``); drop the queue if configured.

        The outcome is true when a running turn was cancelled or queued messages dropped.
        """
        lane = self._lanes.get(session_key)
        if lane is None:
            return StopOutcome()
        clears = self._stop_clears_queue(session_key)
        queued = len(lane.queue) + (lane.drop_gathered(True) if clears else len(lane.gathered))
        if lane.window is not None:
            lane.window.close()  # never waits: dropped, or they run now
        if clears:
            lane.clear(handled=True)
        stopped = lane.control is not None
        if lane.control is not None:
            lane.control.stop("cancelled")
        return StopOutcome(stopped, queued if clears else 0, 0 if clears else queued)

    def steer(self, session_key: str, text: str) -> bool:
        """Fold ``text`` into the running turn; False when no turn is running."""
        control = self._control(session_key)
        if control is None:
            return False
        control.steer(text)
        return True

    def redirect(self, session_key: str, text: str) -> bool:
        """Correct the running turn (stored with its user message); False when idle."""
        control = self._control(session_key)
        if control is None:
            return False
        control.redirect(text)
        return True

    def status(self, session_key: str) -> SessionStatus:
        """Whether a turn runs for ``session_key``, since when, its id, and the queue length."""
        lane = self._lanes.get(session_key)
        if lane is None:
            return SessionStatus(running=False)
        return SessionStatus(
            running=lane.control is not None,
            since=lane.since,
            queue_length=len(lane.queue),
            turn_id=lane.control.turn_id if lane.control is not None else None,
            sender_id=lane.running.sender_id if lane.running is not None else None,
            sender_name=lane.running.sender_name if lane.running is not None else None,
            gathering=len(lane.gathered),
        )

    def _control(self, session_key: str) -> TurnControl | None:
        lane = self._lanes.get(session_key)
        return None if lane is None else _live(lane.control)

    @property
    def busy_keys(self) -> frozenset[str]:
        """Keys with a running turn or a worker still delivering/queued work."""
        return frozenset(self._lanes)

    @property
    def worker_count(self) -> int:
        return len(self._workers)

    # waiting and shutdown --------------------------------------------------------
    async def wait_idle(self, session_key: str) -> None:
        """Wait until ``session_key`` has no running turn and an empty queue."""
        while (lane := self._lanes.get(session_key)) is not None and lane.worker is not None:
            await asyncio.wait({lane.worker})

    async def aclose(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """Stop every running turn (reason ``shutdown``), drop queues, wait for workers.

        Workers still running after ``grace`` seconds are cancelled.
        """
        self._closing = True
        for lane in self._lanes.values():
            lane.clear(handled=False)
            lane.drop_gathered(False)
            if lane.window is not None:
                lane.window.close()
            if lane.control is not None:
                lane.control.stop("shutdown")
        await self._workers.aclose(grace)


def _live(control: TurnControl | None) -> TurnControl | None:
    """The control of a turn still running; a stopped turn takes no more steering."""
    if control is None or control.token.cancelled:
        return None
    return control


def _crashed(
    exc: Exception, *, status: TurnStatus = "failed", exit_reason: ExitReason = "crashed"
) -> TurnResult:
    return TurnResult(
        turn_id="",
        session_id="",
        status=status,
        exit_reason=exit_reason,
        reply=None,
        iterations=0,
        error=f"{type(exc).__name__}: {exc}",
    )


def _turn_span(session_key: str, message: UserMessage) -> tracing.SpanScope:
    """A turn and its reply's delivery: the root of a new trace (:mod:`core.tracing`)."""
    where = message.origin or session_key  # "<platform>:<update id>" / "<platform>:..."
    return tracing.trace(
        "turn",
        platform=where.partition(":")[0],
        **{"session.hash": tracing.session_hash(session_key)},
    )
