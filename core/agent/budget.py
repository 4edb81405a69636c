"""How long a turn may go on: the iteration budget, the loop gate and the wall-clock budget.

``docs/turn-loop.md`` §9 — the loop entry is a triple gate::

    while (calls < max_iterations and budget.remaining > 0) or grace_call:
        if grace_call:
            grace_call = False          # consume the flag; the next iteration must exit
        elif not budget.consume():      # deduct one unit; nothing left
            exit_reason = "budget_exhausted"
            break

``calls`` counts the model calls of *this* turn (capped by the profile's
``max_iterations``); ``budget`` is an :class:`IterationBudget` *shared* with child agents,
so a parent and its ``delegate`` children together cannot exceed it.

**When the grace call is granted.** The gate closes (either cap reached) right after the
model asked for tools and their results came back: without a grace call the work would be
lost and the user would get no answer. So, once per turn, the loop makes one more model
call *without tools*, with a note on the latest tool result telling the model to answer now
with what it has. The turn still ends with status ``budget_exhausted`` (exit reason
``budget_exhausted``) — the reply is whatever that last call said. If the gate closes before
any tool ran (``max_iterations = 0`` or a budget already spent by siblings) there is nothing
to summarise and no grace call is made.

``docs/turn-loop.md`` §11 — :class:`WrapUpReminder` is the one-shot wall-clock reminder: when
``run_budget_seconds`` is set and 80 % of it has passed, the loop injects a wrap-up note
through the steer channel. With the budget unset there is none (the loop holds None).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

CallKind = Literal["normal", "grace"]

WRAP_UP_FRACTION = 0.8


class IterationBudget:
    """A pool of model calls shared by a turn and its child agents."""

    def __init__(self, max_total: int) -> None:
        self.max_total = max_total
        self.used = 0

    @property
    def remaining(self) -> int:
        return max(self.max_total - self.used, 0)

    def consume(self) -> bool:
        """Take one unit; False (and nothing taken) when the pool is empty."""
        if self.used >= self.max_total:
            return False
        self.used += 1
        return True


class LoopGate:
    """The triple gate (``docs/turn-loop.md`` §9) for one turn (see the module docstring)."""

    def __init__(self, max_iterations: int, budget: IterationBudget) -> None:
        self.max_iterations = max_iterations
        self.budget = budget
        self.calls = 0
        self.grace_call = False
        self._grace_used = False

    @property
    def open(self) -> bool:
        return (self.calls < self.max_iterations and self.budget.remaining > 0) or self.grace_call

    def grant_grace_if_closed(self) -> bool:
        """After a batch of tool results: if the caps are reached, arm the one grace call."""
        if self.open or self._grace_used:
            return False
        self.grace_call = True
        self._grace_used = True
        return True

    def admit_extra(self) -> bool:
        """Admit a model call made inside an iteration — a compaction summary, the request
        re-sent after an overflow (``docs/turn-loop.md`` §4): counted like an iteration (in
        ``calls`` and from the shared budget); refused (False, nothing taken) when either
        cap is reached. Never the grace call's: that one answers the user."""
        if not (self.calls < self.max_iterations and self.budget.consume()):
            return False
        self.calls += 1
        return True

    def next_call(self) -> CallKind | None:
        """Admit one model call (``None``: budget exhausted, the loop must exit): the
        grace call when armed, else one within both caps (:attr:`open`)."""
        if self.grace_call:
            self.grace_call = False
            self.calls += 1
            return "grace"
        if self.calls >= self.max_iterations or not self.budget.consume():
            return None
        self.calls += 1
        return "normal"


class WrapUpReminder:
    """One-shot: due once when 80 % of ``seconds`` has passed since ``started_at``."""

    def __init__(self, clock: Callable[[], float], seconds: float) -> None:
        self._clock = clock
        self._seconds = seconds
        self._started_at = clock()
        self._fired = False

    def due(self) -> bool:
        if self._fired:
            return False
        if self._clock() - self._started_at < WRAP_UP_FRACTION * self._seconds:
            return False
        self._fired = True
        return True

    def text(self) -> str:
        return (
            f"[Run budget: {WRAP_UP_FRACTION:.0%} of {self._seconds:g}s used] Start wrapping up: "
            "deliver your answer with the state you already have."
        )
